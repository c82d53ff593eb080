"""``wakeledger-verify BUNDLE [--key PUBKEY_FILE] [--head HEAD_FILE] [--json]``, and
``wakeledger-verify witness …`` (wakeledger_verify/witness.py), and
``wakeledger-verify witness --serve HOST:PORT …`` (wakeledger_verify/add_checkpoint.py).

Exit 0 with a one-line summary when the bundle is valid, 1 naming the first
failure, 2 for a usage error (argparse's own).
"""

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wakeledger_verify import bundle as bundles
from wakeledger_verify import heads, notes


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["witness"] and any(a.startswith("--serve") for a in argv):
        from wakeledger_verify import add_checkpoint  # C2SP tlog-witness, pushed to
        return add_checkpoint.main(argv[1:])
    if argv[:1] == ["witness"]:
        from wakeledger_verify import witness
        return witness.main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="wakeledger-verify",
        description="Check a Wake Ledger export offline: the goal's hash chain, each event's "
                    "inclusion proof, the signed tree head and, with --head, that the log "
                    "still extends a head you kept.")
    parser.add_argument("bundle", help="the JSON file `manage.py ledger export` wrote")
    parser.add_argument("--key", action="append", default=[],
                        help="the server's public key (PEM) to pin; repeat it for keys "
                             "rotated away; without it the key inside the bundle is used")
    parser.add_argument("--head", help="a tree head kept earlier (the JSON of "
                                       "GET /api/v1/ledger/head, or a checkpoint note of "
                                       "GET /api/v1/ledger/checkpoint, cosigned or not)")
    parser.add_argument("--witness-key", action="append", default=[], metavar="VKEY",
                        help="a witness's note verifier key: the bundle's checkpoint must "
                             "carry its cosignature (repeatable)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    try:
        result = _run(args)
    except bundles.Failure as failure:
        _say(args, {"valid": False, "error": str(failure)}, f"INVALID: {failure}")
        return 1
    _say(args, {"valid": True, "error": None, "goal": result.goal, "events": result.events,
                "tree_size": result.tree_size, "root": result.root, "key_id": result.key_id,
                "timestamp": result.timestamp, "key_pinned": result.key_pinned,
                "kept_head_size": result.kept_head["size"] if result.kept_head else None,
                "cosigned_by": result.cosigned_by},
         result.summary())
    return 0


def _run(args: argparse.Namespace) -> bundles.Result:
    data = _read_json(args.bundle, "the bundle")
    keys = []
    for path in args.key:
        try:
            keys.append(heads.load_public_key(_read(path, "the key file")))
        except ValueError as error:
            raise bundles.Failure(f"the key file {path} is not an Ed25519 public key "
                                  f"(PEM): {error}") from None
    kept = _read_head(args.head) if args.head else None
    try:
        witnesses = [notes.parse_verifier(text) for text in args.witness_key]
    except notes.NoteError as error:
        raise bundles.Failure(f"--witness-key: {error}") from None
    return bundles.check(data, key=keys or None, kept_head=kept, witnesses=witnesses)


def _read_head(path: str) -> Any:
    """A kept head: JSON, or a checkpoint note (kept as its text)."""
    text = _read(path, "the head file")
    if text.lstrip().startswith("{"):
        return _read_json(path, "the head file")
    return text


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise bundles.Failure(f"{what} {path} cannot be read: {error}") from None


def _read_json(path: str, what: str) -> Any:
    try:
        return json.loads(_read(path, what))
    except ValueError as error:
        raise bundles.Failure(f"{what} {path} is not JSON: {error}") from None


def _say(args: argparse.Namespace, machine: dict[str, Any], human: str) -> None:
    print(json.dumps(machine) if args.json else human)


if __name__ == "__main__":
    sys.exit(main())

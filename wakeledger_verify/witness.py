"""``wakeledger-verify witness``: a witness an auditor runs on another machine.

It polls the log's checkpoint (C2SP tlog-checkpoint), checks the log's note
signature, checks a consistency proof from the last checkpoint it accepted
(RFC 9162, computed here, trusting nothing the server says about roots),
keeps what it accepted in its own file (mode 0600), and sends the checkpoint
back cosigned (C2SP tlog-cosignature v1, the statement a tlog-witness makes:
"this extends everything I saw before"). A checkpoint that does not extend
the last one, a smaller one, or a different root at the same size is a split
view or a rollback: it says so and exits 3, cosigning nothing. So is a log
that serves no checkpoint at all (409 not_sealed) after this witness accepted
one: its heads were deleted. The alarm is kept in the state file, and the
witness cosigns nothing for that log until an operator clears it
(``--forget-alarm``). A log that accepts events but publishes no new
checkpoint for ``--stale-after`` seconds is stale (exit 4 with ``--once``):
the witness says so and stops refreshing its cosignature, so that clients who
read the cosignature's time see the log's age.

This is the pull side of C2SP tlog-witness's statement: the log does not
push to it, so it needs nothing open to the network. Standard library and
``cryptography`` only.
"""

import argparse
import contextlib
import json
import os
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from wakeledger_verify import merkle, notes

ALARM = 3  # exit status on a split view or a rollback (kept in the state file)
STALE = 4  # exit status (--once) for a log that accepts events and signs nothing new
STALE_AFTER = 900.0  # seconds; the sealer signs every minute by default
TOKEN_ENV = "WAKELEDGER_WITNESS_TOKEN"  # noqa: S105 (a variable's name)


class WitnessAlarm(Exception):
    """The log showed this witness a history that does not extend what it accepted."""


class SplitView(WitnessAlarm):
    pass


class Rollback(WitnessAlarm):
    pass


class Stale(Exception):
    """The log accepts events and has published no new checkpoint for too long."""


@dataclass(frozen=True)
class State:
    origin: str
    size: int
    root: bytes
    checkpoint: str
    # When this witness (its own clock, Unix seconds) first saw events
    # waiting beyond the checkpoint it holds, that checkpoint still the newest.
    waiting_since: float | None = None
    # Why this witness stopped trusting the log (a split view, a rollback).
    alarm: str | None = None

    def as_json(self) -> str:
        return json.dumps({"origin": self.origin, "size": self.size, "root": self.root.hex(),
                           "checkpoint": self.checkpoint, "waiting_since": self.waiting_since,
                           "alarm": self.alarm}, indent=1) + "\n"


ProofFor = Callable[[int, int], list[bytes]]


def observe(state: State | None, note: str, log: notes.Verifier, proof_for: ProofFor) -> State:
    """Accept ``note`` if it is the log's and extends ``state``; the new state.
    NoteError for a note that is not the log's; WitnessAlarm for a fork."""
    opened = notes.open_checkpoint(note, log)
    new = opened.checkpoint
    if state is not None:
        if new.size < state.size:
            raise Rollback(f"ROLLBACK: the log now shows {new.size} leaves; this witness "
                           f"accepted a checkpoint of {state.size} leaves")
        if new.size == state.size and new.root != state.root:
            raise SplitView(f"SPLIT VIEW: two checkpoints of {new.size} leaves with different "
                            f"roots ({state.root.hex()} accepted, {new.root.hex()} now)")
        if new.size > state.size > 0:
            proof = proof_for(state.size, new.size)
            if not merkle.consistent(state.size, state.root, new.size, new.root, proof):
                raise SplitView(f"SPLIT VIEW: the checkpoint of {new.size} leaves does not "
                                f"extend the accepted one of {state.size} leaves (the "
                                "consistency proof fails)")
    return State(new.origin, new.size, new.root, opened.body + "\n" + "".join(
        s.line() for s in opened.signatures if log.verify(opened.body, s) is not None))


# ------------------------------------------------------------------ files


def load_state(path: Path) -> State | None:
    if not path.exists():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    waiting = data.get("waiting_since")
    return State(data["origin"], int(data["size"]), bytes.fromhex(data["root"]),
                 data["checkpoint"], None if waiting is None else float(waiting),
                 data.get("alarm"))


def _write_private(path: Path, data: bytes, *, exclusive: bool = False) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if exclusive:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(fd, "wb") as handle:
            handle.write(data)
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with open(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def save_state(path: Path, state: State) -> None:
    _write_private(path, state.as_json().encode())


def remember_alarm(path: Path, alarm: str) -> None:
    """Keep the alarm with what was accepted: the next run does not trust the log again."""
    state = load_state(path)
    if state is not None:
        save_state(path, replace(state, alarm=alarm))


def witness_key(path: Path) -> Ed25519PrivateKey:
    """The witness's own Ed25519 key (PEM, PKCS 8), created 0600 when absent."""
    if not path.exists():
        key = Ed25519PrivateKey.generate()
        with contextlib.suppress(FileExistsError):
            _write_private(path, key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption()), exclusive=True)
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{path} is not an Ed25519 private key")
    return key


# ------------------------------------------------------------------ HTTP


class HttpProblem(OSError):
    """The server answered with an error status (and, from this product, a
    problem document's stable ``code``)."""

    def __init__(self, path: str, status: int, detail: str) -> None:
        super().__init__(f"{path}: HTTP {status}: {detail}")
        self.status = status
        try:
            self.code = str(json.loads(detail).get("code", ""))
        except (ValueError, AttributeError):
            self.code = ""


class Server:
    def __init__(self, url: str, token: str, timeout: float = 30.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{url} is not an http(s) URL")
        self.url, self.token, self.timeout = url.rstrip("/"), token, timeout

    def _call(self, path: str, body: bytes | None = None) -> bytes:
        headers = {"Authorization": f"Bearer {self.token}", "User-Agent": "wakeledger-witness"}
        if body is not None:
            headers |= {"Content-Type": "application/json",
                        "Idempotency-Key": f"witness-{uuid.uuid4()}"}
        # http(s) only: checked in __init__.
        request = urllib.request.Request(self.url + path, data=body,  # noqa: S310
                                         headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:  # noqa: S310
                return answer.read()
        except urllib.error.HTTPError as error:
            detail = error.read()[:300].decode(errors="replace")
            raise HttpProblem(path, error.code, detail) from None

    def checkpoint(self) -> str:
        return self._call("/api/v1/ledger/checkpoint").decode()

    def head_at_or_below(self, size: int) -> dict[str, Any] | None:
        """The stored signed head of the most leaves up to ``size``, or None."""
        answer = json.loads(self._call(f"/api/v1/ledger/heads?before={size + 1}&limit=1"))
        return answer["heads"][0] if answer["heads"] else None

    def tail(self) -> dict[str, Any] | None:
        """What the log accepted beyond its newest head (None: a server without it)."""
        try:
            return json.loads(self._call("/api/v1/ledger/tail"))
        except HttpProblem as problem:
            if problem.status == 404:
                return None
            raise

    def consistency(self, first: int, second: int) -> list[bytes]:
        answer = json.loads(self._call(f"/api/v1/ledger/proof/consistency?from={first}"
                                       f"&to={second}"))
        return [bytes.fromhex(h) for h in answer["proof"]]

    def cosign(self, note: str) -> list[str]:
        body = json.dumps({"checkpoint": note}).encode()
        return json.loads(self._call("/api/v1/ledger/checkpoint", body))["witnesses"]


def fetch_checkpoint(server: Server, state: State | None) -> str:
    """The served checkpoint. None served after one was accepted is a rollback:
    the log cannot unsign what it signed, so its heads were deleted."""
    try:
        return server.checkpoint()
    except HttpProblem as problem:
        if problem.status == 409 and problem.code == "not_sealed" and state and state.size:
            raise Rollback(f"ROLLBACK: the log serves no checkpoint (409 not_sealed) and this "
                           f"witness accepted one of {state.size} leaves: the log's signed "
                           "heads were deleted") from None
        raise


def check_head_kept(server: Server, state: State) -> None:
    """The head this witness accepted must still be among the stored heads:
    deleting it (the tree still extends it) hides what was signed."""
    if state.size == 0:
        return
    head = server.head_at_or_below(state.size)
    if head is None or head["size"] != state.size:
        raise Rollback(f"ROLLBACK: the log no longer stores the head of {state.size} leaves "
                       "this witness accepted (its signed heads were deleted)")
    if head["root"] != state.root.hex():
        raise SplitView(f"SPLIT VIEW: the log stores a head of {state.size} leaves with root "
                        f"{head['root']}; this witness accepted {state.root.hex()}")


def waiting(before: State | None, accepted: State, tail: dict[str, Any] | None,
            now: float) -> float | None:
    """Since when events have waited beyond an unchanged checkpoint (None: they do not)."""
    if before is None or accepted.size != before.size or not tail or not tail["unsealed"]:
        return None
    return before.waiting_since if before.waiting_since is not None else now


def step(server: Server, args: argparse.Namespace, log: notes.Verifier,
         key: Ed25519PrivateKey) -> str:
    """One poll: accept, remember, cosign. The line to print."""
    state_path = Path(args.state)
    state = load_state(state_path)
    accepted = observe(state, fetch_checkpoint(server, state), log, server.consistency)
    if state is not None and accepted.size > state.size:
        check_head_kept(server, state)
    now = time.time()
    tail = server.tail()
    accepted = replace(accepted, waiting_since=waiting(state, accepted, tail, now))
    save_state(state_path, accepted)  # remembered before it is vouched for
    stale_after = args.stale_after
    if stale_after > 0 and tail and accepted.waiting_since is not None \
            and now - accepted.waiting_since >= stale_after:
        oldest = tail.get("oldest_unsealed_at") or "?"
        raise Stale(f"STALE: the log accepts events ({tail['unsealed']} waiting, the oldest "
                    f"recorded at {oldest}) but has published no checkpoint beyond "
                    f"{accepted.size} leaves for {int(now - accepted.waiting_since)} s "
                    f"(--stale-after {stale_after:g}); its sealer stopped or raised its "
                    "alarm. Not cosigning again until it grows.")
    body = notes.split(accepted.checkpoint)[0]
    cosignature = notes.cosign(body, args.name, key, int(time.time()))
    kept = server.cosign(accepted.checkpoint + cosignature.line())
    return (f"cosigned {accepted.origin} at {accepted.size} leaves, root "
            f"{accepted.root.hex()} ({'kept' if args.name in kept else 'NOT kept'} by the "
            "server)")


def tell_server(server: Server, state: State | None, name: str,
                key: Ed25519PrivateKey) -> str:
    """Send the server the checkpoint this witness accepted, cosigned: a log
    that holds no head with it answers 404 checkpoint_unknown and, where the
    server watches its witnesses, tells its operators of a split view or of
    deleted heads. A statement the witness already made; what to print."""
    if state is None:
        return "nothing accepted yet: nothing to tell the server"
    body = notes.split(state.checkpoint)[0]
    line = notes.cosign(body, name, key, int(time.time())).line()
    try:
        server.cosign(state.checkpoint + line)
    except HttpProblem as problem:
        return (f"told the server of the checkpoint of {state.size} leaves this witness "
                f"accepted: HTTP {problem.status} {problem.code or ''}".rstrip())
    except (OSError, ValueError, KeyError) as error:
        return f"could not tell the server: {error}"
    return (f"told the server of the checkpoint of {state.size} leaves this witness "
            "accepted: it still holds it")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # NaN too
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds (0 or more)")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="wakeledger-verify witness",
        description="Poll a Wake Ledger's checkpoint, check that it extends the last one "
                    "accepted, remember it and send it back cosigned. Exit 3 on a split "
                    "view or a rollback.")
    parser.add_argument("--key", required=True, help="this witness's Ed25519 key (PEM; "
                                                     "created 0600 if absent)")
    parser.add_argument("--name", required=True,
                        help="this witness's key name, e.g. witness.example.org/auditor")
    parser.add_argument("--print-key", action="store_true",
                        help="print this witness's verifier key (for the server's "
                             "WAKELEDGER_WITNESS_KEYS) and exit")
    parser.add_argument("--url", help="the server's base URL (http://host:port)")
    parser.add_argument("--log-key", help="the log's note verifier key "
                                          "(`manage.py ledger key --note`)")
    parser.add_argument("--state", help="this witness's state file (created 0600)")
    parser.add_argument("--interval", type=float, default=60.0,
                        help="seconds between polls (default 60)")
    parser.add_argument("--once", action="store_true", help="poll once and exit")
    parser.add_argument("--stale-after", type=_seconds, default=STALE_AFTER, metavar="SECONDS",
                        help="alarm when the log accepts events but publishes no new "
                             f"checkpoint for this long (default {STALE_AFTER:g}; 0: never); "
                             f"--once then exits {STALE}")
    parser.add_argument("--forget-alarm", action="store_true",
                        help="clear a split view or rollback alarm kept in the state file "
                             "(after investigating it) and poll again")
    args = parser.parse_args(argv)
    try:
        key = witness_key(Path(args.key))
        if args.print_key:
            print(notes.verifier(args.name, key.public_key(), notes.COSIGNATURE_V1).text())
            return 0
        if not (args.url and args.log_key and args.state):
            parser.error("--url, --log-key and --state are needed to witness")
        log = notes.parse_verifier(args.log_key)
        if log.algorithm != notes.ED25519:
            parser.error("--log-key is the log's Ed25519 note key (`ledger key --note`)")
        token = os.environ.get(TOKEN_ENV, "")
        if not token:
            parser.error(f"set {TOKEN_ENV} to an auditor's API token")
    except (OSError, ValueError) as error:
        print(f"wakeledger-verify witness: {error}", file=sys.stderr)
        return 1
    try:
        server = Server(args.url, token)
        state = load_state(Path(args.state))
    except (OSError, ValueError, KeyError) as error:
        print(f"wakeledger-verify witness: {error}", file=sys.stderr)
        return 1
    if state is not None and state.alarm:
        if not args.forget_alarm:
            print(f"ALARM: {state.alarm}\nThis witness trusts the log no more and cosigns "
                  "nothing for it; after investigating, run it with --forget-alarm.",
                  file=sys.stderr, flush=True)
            return ALARM
        save_state(Path(args.state), replace(state, alarm=None))
    while True:
        try:
            print(step(server, args, log, key), flush=True)
        except WitnessAlarm as alarm:
            print(f"ALARM: {alarm}", file=sys.stderr, flush=True)
            remember_alarm(Path(args.state), str(alarm))
            print(tell_server(server, load_state(Path(args.state)), args.name, key),
                  file=sys.stderr, flush=True)
            return ALARM
        except Stale as stale:
            print(f"ALARM: {stale}", file=sys.stderr, flush=True)
            if args.once:
                return STALE
        except (OSError, ValueError, KeyError) as error:  # the network, a bad answer
            print(f"witness: {error}", file=sys.stderr, flush=True)
            if args.once:
                return 1
        if args.once:
            return 0
        time.sleep(args.interval)

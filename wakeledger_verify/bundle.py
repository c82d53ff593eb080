"""Checking an export bundle: the goal's chain, every inclusion proof, the
head's signature, and optionally that the head extends one the auditor kept.

``check`` never raises on bad input: a bundle is untrusted, so every shape
problem is a failure it names, like a wrong hash.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from wakeledger_verify import BUNDLE_FORMAT, heads, merkle, notes
from wakeledger_verify.records import FIELDS, GENESIS, chain_hash, record_leaf_hash


class Failure(Exception):
    """The first check that failed, in words an auditor can act on."""


@dataclass
class Result:
    goal: str = ""
    events: int = 0
    tree_size: int = 0
    root: str = ""
    key_id: str = ""
    timestamp: str = ""
    key_pinned: bool = False
    kept_head: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    cosigned_by: list[str] = field(default_factory=list)  # witnesses checked here

    def summary(self) -> str:
        last = f"seq 1-{self.events}" if self.events > 1 else "seq 1"
        text = (f"valid: goal {self.goal}, {self.events} event(s) ({last}) included in the "
                f"log of {self.tree_size} leaves, root {self.root}, head signed by "
                f"{self.key_id} at {self.timestamp}")
        if self.kept_head is not None:
            text += f"; extends the kept head of {self.kept_head['size']} leaves"
        if self.cosigned_by:
            text += f"; cosigned by {', '.join(self.cosigned_by)}"
        if not self.key_pinned:
            text += " (key taken from the bundle itself: pass --key to pin it)"
        return text


def check(bundle: Any, *, key: Ed25519PublicKey | Sequence[Ed25519PublicKey] | None = None,
          kept_head: Any = None, witnesses: Sequence[notes.Verifier] = ()) -> Result:
    """Raise Failure naming the first thing wrong; return what was proven.

    ``key``: the pinned public key, or several (keys rotated away still sign
    older heads, a kept head among them); None trusts the bundle's own.
    ``kept_head``: a head (JSON) or a checkpoint note, cosigned or not.
    ``witnesses``: each must have cosigned the bundle's checkpoint."""
    pinned = _pinned(key)
    if not isinstance(bundle, Mapping):
        raise Failure("the bundle is not a JSON object")
    if bundle.get("format") != BUNDLE_FORMAT:
        raise Failure(f"the bundle's format is {bundle.get('format')!r}, not {BUNDLE_FORMAT}")
    head = bundle.get("head")
    problem = heads.head_shape_error(head)
    if problem:
        raise Failure(problem)
    result = Result(goal=str(bundle.get("goal", "")), tree_size=head["size"],
                    root=head["root"], key_id=head["key_id"], timestamp=head["timestamp"],
                    key_pinned=pinned is not None)
    _check_signature(head, _signer(bundle, head, pinned, "the bundle's head"),
                     "the bundle's head")
    result.events = _check_events(bundle, head)
    if witnesses or isinstance(bundle.get("checkpoint"), str):
        result.cosigned_by = _check_checkpoint(bundle, head, pinned, witnesses)
    if isinstance(kept_head, str):
        kept_head = _kept_checkpoint(bundle, head, kept_head, pinned)
    if kept_head is not None:
        result.kept_head = _check_kept(bundle, head, kept_head, pinned)
    return result


def _open_note(bundle: Mapping[str, Any], key_id: str, note: str,
               pinned: dict[str, Ed25519PublicKey] | None, what: str,
               witnesses: Sequence[notes.Verifier] = ()) -> notes.Opened:
    """A checkpoint note signed by the key ``key_id`` names (pinned, or the bundle's)."""
    key = _signer(bundle, {"key_id": key_id}, pinned, what)
    try:
        origin = notes.parse_checkpoint(notes.split(note)[0]).origin
        return notes.open_checkpoint(note, notes.verifier(origin, key), witnesses)
    except notes.NoteError as error:
        raise Failure(f"{what}: {error}") from None


def _check_checkpoint(bundle: Mapping[str, Any], head: Mapping[str, Any],
                      pinned: dict[str, Ed25519PublicKey] | None,
                      witnesses: Sequence[notes.Verifier]) -> list[str]:
    """The head as a C2SP checkpoint: the same size and root, the log's note
    signature, and a cosignature of every witness asked for."""
    note = bundle.get("checkpoint")
    if not isinstance(note, str):
        raise Failure("the bundle carries no checkpoint for the witnesses to have cosigned")
    opened = _open_note(bundle, head["key_id"], note, pinned, "the bundle's checkpoint",
                        witnesses)
    if (opened.checkpoint.size, opened.checkpoint.root.hex()) != (head["size"], head["root"]):
        raise Failure("the bundle's checkpoint is not its head (size or root differ)")
    missing = [w.name for w in witnesses if w.name not in opened.cosigned_by]
    if missing:
        names = ", ".join(missing)
        raise Failure(f"the bundle's checkpoint is not cosigned by {names} (an export takes "
                      f"the newest head; `ledger export --witness {missing[0]}` takes the "
                      "newest one that witness cosigned)")
    return sorted(opened.cosigned_by)


def _kept_checkpoint(bundle: Mapping[str, Any], head: Mapping[str, Any], note: str,
                     pinned: dict[str, Ed25519PublicKey] | None) -> dict[str, Any]:
    """A kept checkpoint as the (size, root) it signs; its signature checked
    here, by the bundle's head's key (keys rotated away: pass them with --key)."""
    errors = []
    for key_id in ([*pinned] if pinned else [head["key_id"]]):
        try:
            opened = _open_note(bundle, key_id, note, pinned, "the kept checkpoint")
        except Failure as failure:
            errors.append(str(failure))
            continue
        return {"size": opened.checkpoint.size, "root": opened.checkpoint.root.hex(),
                "checkpoint": True}
    raise Failure(errors[0] if errors else "the kept checkpoint cannot be checked")


def _pinned(key: Ed25519PublicKey | Sequence[Ed25519PublicKey] | None
            ) -> dict[str, Ed25519PublicKey] | None:
    if key is None:
        return None
    keys = [key] if isinstance(key, Ed25519PublicKey) else list(key)
    return {heads.key_id(k): k for k in keys} or None


def _signer(bundle: Mapping[str, Any], head: Mapping[str, Any],
            pinned: dict[str, Ed25519PublicKey] | None, what: str) -> Ed25519PublicKey:
    if pinned is None:
        return _bundled_key(bundle, head["key_id"])
    if head["key_id"] not in pinned:
        raise Failure(f"{what} is signed by key {head['key_id']}, not by the given key "
                      f"{', '.join(sorted(pinned))}")
    return pinned[head["key_id"]]


def _bundled_key(bundle: Mapping[str, Any], wanted: str) -> Ed25519PublicKey:
    keys = bundle.get("public_keys")
    if not isinstance(keys, Mapping) or not isinstance(keys.get(wanted), str):
        raise Failure(f"the bundle carries no public key for {wanted}")
    try:
        key = heads.load_public_key(keys[wanted])
    except ValueError as error:
        raise Failure(f"the bundle's public key {wanted} cannot be read: {error}") from None
    if heads.key_id(key) != wanted:
        raise Failure(f"the bundle's public key named {wanted} is key {heads.key_id(key)}")
    return key


def _check_signature(head: Mapping[str, Any], key: Ed25519PublicKey, what: str) -> None:
    if not heads.signature_valid(head, key):
        raise Failure(f"signature invalid for key {head['key_id']} ({what})")


def _check_events(bundle: Mapping[str, Any], head: Mapping[str, Any]) -> int:
    events = bundle.get("events")
    if not isinstance(events, list) or not events:
        raise Failure("the bundle has no events")
    subtrees = _subtrees(bundle.get("subtrees"))
    halves = _subtrees(bundle.get("halves", {}), "halves")
    root = bytes.fromhex(head["root"])
    size = head["size"]
    previous_hash, previous_position = GENESIS, -1
    for number, record in enumerate(events, start=1):
        where = f"event {number}"
        if not isinstance(record, Mapping) or set(record) != set(FIELDS):
            raise Failure(f"{where}: the record does not have exactly the fields "
                          f"{', '.join(FIELDS)}")
        if record["goal"] != _goal(bundle):
            raise Failure(f"{where}: belongs to goal {record['goal']}, not "
                          f"{_goal(bundle)}")
        if record["seq"] != number:
            raise Failure(f"{where}: has seq {record['seq']}; the chain must go 1, 2, 3 …")
        if record["prev_hash"] != previous_hash:
            raise Failure(f"{where}: prev_hash does not match the previous event's hash")
        try:
            recomputed = chain_hash(record)
            leaf = record_leaf_hash(record)
        except (TypeError, ValueError) as error:
            raise Failure(f"{where}: the record cannot be encoded: {error}") from None
        if recomputed != record["hash"]:
            raise Failure(f"{where}: hash does not match the event's content")
        position = record["position"]
        if not isinstance(position, int) or isinstance(position, bool) \
                or not previous_position < position < size:
            raise Failure(f"{where}: its position {position!r} is not after the previous "
                          f"event's and inside the head's {size} leaves")
        try:
            # The path's shape comes from (position, size) alone; only its
            # hashes come from the bundle.
            path = merkle.inclusion_path(position, size, subtrees)
            reached = merkle.root_from_inclusion(position, size, leaf, path)
        except KeyError as missing:
            raise Failure(f"{where}: inclusion proof does not match root (the bundle lacks "
                          f"subtree {missing.args[0]})") from None
        if reached != root:
            raise Failure(f"{where}: inclusion proof does not match root"
                          f"{_blame(position, size, subtrees, halves)}")
        previous_hash, previous_position = record["hash"], position
    return len(events)


def _blame(position: int, size: int, subtrees: Mapping[str, bytes],
           halves: Mapping[str, bytes]) -> str:
    """What a failed path says about the stored tree: the stored node on it
    that is not the hash of its two halves (the bundle carries them), or else
    every stored subtree the path was built from."""
    keys = [key for a, b in merkle.inclusion_ranges(position, size)
            for key in merkle.range_keys(a, b)]
    known = {**halves, **subtrees}
    for key in keys:
        names = [merkle.subtree_name(half) for half in merkle.halves(key)]
        if names and all(name in known for name in names) and merkle.node_hash(
                known[names[0]], known[names[1]]) != subtrees[merkle.subtree_name(key)]:
            level, index = key
            return (f": the stored node {level}/{index} (leaves {index << level} to "
                    f"{((index + 1) << level) - 1}) is wrong, it is not the hash of its "
                    f"halves {names[0]} and {names[1]}")
    return (": the event's record or one of the stored subtrees its path is made of ("
            f"{', '.join(merkle.subtree_name(key) for key in keys)}) is wrong")


def _subtrees(value: Any, what: str = "subtrees") -> dict[str, bytes]:
    if not isinstance(value, Mapping):
        raise Failure("the bundle has no subtrees (its inclusion multi-proof)"
                      if what == "subtrees" else f"the bundle's {what} are not a JSON object")
    try:
        return {str(name): bytes.fromhex(digest) for name, digest in value.items()}
    except (TypeError, ValueError):
        raise Failure(f"the bundle's {what} are not hex") from None


def _goal(bundle: Mapping[str, Any]) -> str:
    return str(bundle.get("goal", ""))


def _check_kept(bundle: Mapping[str, Any], head: Mapping[str, Any], kept: Any,
                pinned: dict[str, Ed25519PublicKey] | None) -> dict[str, Any]:
    if not (isinstance(kept, Mapping) and kept.get("checkpoint") is True):  # checked above
        problem = heads.head_shape_error(kept)
        if problem:
            raise Failure(f"the kept head is not a tree head: {problem}")
        _check_signature(kept, _signer(bundle, kept, pinned, "the kept head"),
                         "the kept head")
    if kept["size"] > head["size"]:
        raise Failure(f"the kept head ({kept['size']} leaves) is newer than the bundle's "
                      f"({head['size']}): export the goal again")
    if kept["size"] == head["size"]:
        if kept["root"] != head["root"]:
            raise Failure(f"the kept head and the bundle's head both cover {head['size']} "
                          "leaves but their roots differ: the log was rewritten")
        return dict(kept)
    proofs = bundle.get("consistency")
    path = proofs.get(str(kept["size"])) if isinstance(proofs, Mapping) else None
    if kept["size"] == 0:
        return dict(kept)
    if not isinstance(path, list):
        raise Failure(f"the bundle has no consistency proof from {kept['size']} leaves: "
                      f"export it with --from-size {kept['size']}")
    try:
        hashes = [bytes.fromhex(item) for item in path]
    except (TypeError, ValueError):
        raise Failure("the consistency proof is not hex") from None
    if not merkle.consistent(kept["size"], bytes.fromhex(kept["root"]), head["size"],
                             bytes.fromhex(head["root"]), hashes):
        raise Failure(f"the bundle's head is not consistent with the kept head of "
                      f"{kept['size']} leaves: the log was rewritten or rolled back")
    return dict(kept)

"""The per-goal SHA-256 hash chain over canonical JSON (docs/design.md, "Event store").

hash = sha256(prev_hash || canonical_json([goal_id, seq, kind, data, actor, recorded_at]))

Pure (no Django): the store computes it on append, ``ledger verify`` recomputes
it from stored rows, and both must agree byte for byte.
"""

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from json.encoder import encode_basestring
from typing import Any

from ledger.domain import iso

GENESIS = "0" * 64


# sort_keys: PostgreSQL's jsonb does not keep key order, so the order a row
# comes back in must not matter. allow_nan=False: NaN is not JSON. One encoder,
# built once: json.dumps with these arguments builds this very encoder on every
# call and calls its encode(), a tenth of verify's time per event.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                              allow_nan=False)


def canonical_text(value: Any) -> str:
    return _CANONICAL.encode(value)


def canonical_json(value: Any) -> bytes:
    return canonical_text(value).encode()


def event_hash(prev_hash: str, goal_id: str, seq: int, kind: str, data: Mapping[str, Any],
               actor: str, recorded_at: datetime) -> str:
    return linked_hash(prev_hash, goal_id, seq, kind, canonical_text(data), actor, recorded_at)


_string = json.JSONEncoder(ensure_ascii=False).encode
# What _string does with a str, without its method call: the goal id, the
# kind and the time are always str (str(), the payload's KIND, iso()).
_str_text = encode_basestring


def linked_hash(prev_hash: str, goal_id: str, seq: int, kind: str, data_text: str,
                actor: str, recorded_at: datetime) -> str:
    """``event_hash`` with the event's data already in its canonical text, which
    the store also keeps as the stored JSON (one encoding per event, not two).
    The payload is spelled out as canonical_json of the list would spell it:
    its items joined by commas, strings and the seq as json.dumps writes them."""
    payload = ",".join((_str_text(str(goal_id)), str(int(seq)), _str_text(kind),
                        data_text, _string(actor), _str_text(iso(recorded_at))))
    return hashlib.sha256(f"{prev_hash}[{payload}]".encode()).hexdigest()


@dataclass(frozen=True)
class StoredLink:
    seq: int
    kind: str
    data: Mapping[str, Any]
    actor: str
    recorded_at: datetime
    prev_hash: str
    hash: str


@dataclass(frozen=True)
class Break:
    seq: int
    why: str


def first_break(goal_id: str, links: Iterable[StoredLink], *, version: int | None = None,
                last_hash: str | None = None) -> tuple[Break | None, int, str]:
    """Walk a goal's events in seq order; return the first broken link (or None),
    how many links were checked, and the head hash.

    With ``version`` and ``last_hash`` (the goal row's record of its chain), the
    chain must also end exactly there: a chain whose every link is sound can
    still have lost its last events, or have had its last event rewritten with
    a recomputed hash, and only the goal row remembers where it ended."""
    expected_prev, expected_seq, checked = GENESIS, 1, 0
    hash_at_version = None
    for link in links:
        checked += 1
        if link.seq != expected_seq:
            why = f"seq {link.seq} follows seq {expected_seq - 1}"
            return Break(expected_seq, why), checked, ""
        if link.prev_hash != expected_prev:
            why = "prev_hash does not match the previous event's hash"
            return Break(link.seq, why), checked, ""
        recomputed = event_hash(link.prev_hash, goal_id, link.seq, link.kind, link.data,
                                link.actor, link.recorded_at)
        if recomputed != link.hash:
            return Break(link.seq, "hash does not match the event's content"), checked, ""
        if link.seq == version:
            hash_at_version = link.hash
        expected_prev, expected_seq = link.hash, link.seq + 1
    if version is None:
        return None, checked, expected_prev
    return head_break(version, last_hash or "", expected_seq - 1, hash_at_version), \
        checked, expected_prev


def head_break(version: int, last_hash: str, last_seq: int,
               hash_at_version: str | None) -> Break | None:
    """Compare the goal row's record of its chain (``version``, ``last_hash``)
    with the chain as read: it ends at ``last_seq``, and its event at seq
    ``version`` (if it has one) has the hash ``hash_at_version``."""
    if last_seq < version:
        return Break(last_seq + 1, f"the goal row records version {version} / head "
                                   f"{last_hash} but the chain ends at seq {last_seq}")
    if hash_at_version != last_hash:
        return Break(version, f"the event's hash is not the goal row's head {last_hash}")
    if last_seq > version:
        return Break(version + 1, f"the chain goes on to seq {last_seq} past the goal row's "
                                  f"version {version}")
    return None

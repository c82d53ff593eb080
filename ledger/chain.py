"""The per-goal SHA-256 hash chain over canonical JSON (DESIGN section 3).

hash = sha256(prev_hash || canonical_json([goal_id, seq, kind, data, actor, recorded_at]))

Pure (no Django): the store computes it on append, ``ledger verify`` recomputes
it from stored rows, and both must agree byte for byte.
"""

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ledger.domain import iso

GENESIS = "0" * 64


def canonical_json(value: Any) -> bytes:
    # sort_keys: PostgreSQL's jsonb does not keep key order, so the order a
    # row comes back in must not matter. allow_nan=False: NaN is not JSON.
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def event_hash(prev_hash: str, goal_id: str, seq: int, kind: str, data: Mapping[str, Any],
               actor: str, recorded_at: datetime) -> str:
    payload = canonical_json([str(goal_id), seq, kind, data, actor, iso(recorded_at)])
    return hashlib.sha256(prev_hash.encode("ascii") + payload).hexdigest()


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


def first_break(goal_id: str, links: Iterable[StoredLink]) -> tuple[Break | None, int, str]:
    """Walk a goal's events in seq order; return the first broken link (or None),
    how many links were checked, and the head hash."""
    expected_prev, expected_seq, checked = GENESIS, 1, 0
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
        expected_prev, expected_seq = link.hash, link.seq + 1
    return None, checked, expected_prev

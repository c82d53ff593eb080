"""What a leaf of the log is: an event's whole stored record, canonically encoded.

The server builds these records from its rows and the verifier from an
export; both hash the bytes ``leaf_bytes`` returns, so this module is the one
definition of a leaf. Changing it changes every root: add a new version,
never edit this one.
"""

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from wakeledger_verify.merkle import leaf_hash

# The same encoding as the per-goal chain (ledger/eventstore/chain.py): sorted keys (jsonb
# keeps no key order), no spaces, UTF-8 as is, NaN refused.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                              allow_nan=False)

GENESIS = "0" * 64

# The fields of an event's stored record, all of them: a column left out of
# the leaf could be rewritten without changing the root.
FIELDS = ("position", "id", "goal", "seq", "kind", "data", "actor", "recorded_at",
          "idempotency_key", "prev_hash", "hash")


def canonical(value: Any) -> bytes:
    return _CANONICAL.encode(value).encode()


def leaf_record(position: int, event_id: int, goal: str, seq: int, kind: str,
                data: Any, actor: str, recorded_at: str, idempotency_key: str | None,
                prev_hash: str, hash: str) -> dict[str, Any]:
    """``position`` is the leaf's index in the tree (assigned when the event was
    sealed), ``event_id`` the database id; ``recorded_at`` as the chain hashes it."""
    return {"position": position, "id": event_id, "goal": goal, "seq": seq, "kind": kind,
            "data": data, "actor": actor, "recorded_at": recorded_at,
            "idempotency_key": idempotency_key, "prev_hash": prev_hash, "hash": hash}


def leaf_bytes(record: Mapping[str, Any]) -> bytes:
    """Refuses a record with missing or extra fields: the leaf must be exactly these."""
    if set(record) != set(FIELDS):
        missing = sorted(set(FIELDS) - set(record))
        extra = sorted(set(record) - set(FIELDS))
        raise ValueError(f"an event record has the fields {', '.join(FIELDS)}"
                         + (f"; missing {', '.join(missing)}" if missing else "")
                         + (f"; unknown {', '.join(extra)}" if extra else ""))
    return b"wakeledger.event.v1:" + canonical({name: record[name] for name in FIELDS})


def record_leaf_hash(record: Mapping[str, Any]) -> bytes:
    return leaf_hash(leaf_bytes(record))


def chain_hash(record: Mapping[str, Any]) -> str:
    """The per-goal chain link (docs/design.md, "Event store"):
    sha256(prev_hash || canonical_json([goal, seq, kind, data, actor, recorded_at]))."""
    payload = _CANONICAL.encode([record["goal"], record["seq"], record["kind"], record["data"],
                                 record["actor"], record["recorded_at"]])
    return hashlib.sha256(f"{record['prev_hash']}{payload}".encode()).hexdigest()

"""The log's tree as stored: leaves (``LogLeaf``) and complete subtrees (``LogNode``).

Pure tree arithmetic lives in ``wakeledger_verify.merkle``; this module only
reads and writes the hashes it asks for. A proof of any size needs at most a
few dozen stored subtrees, fetched in one query per table.
"""

from collections.abc import Iterable, Mapping
from typing import Any

from django.db.models import Max

from ledger.domain import iso
from ledger.models import Event, LogLeaf, LogNode, TreeHead
from wakeledger_verify import merkle, records
from wakeledger_verify.merkle import Key

_INDEX_BITS = 48
_CHUNK = 500  # ids per IN (…): well below SQLite's variable limit


class TreeCorrupt(Exception):
    """A stored subtree the tree's size says must exist is missing."""


def node_key(level: int, index: int) -> int:
    return level << _INDEX_BITS | index


def size() -> int:
    """How many leaves the tree has (positions 0 … size - 1)."""
    last = LogLeaf.objects.aggregate(last=Max("position"))["last"]
    return 0 if last is None else last + 1


def fetch(keys: Iterable[Key]) -> dict[Key, bytes]:
    keys = set(keys)
    found: dict[Key, bytes] = {}
    leaves = sorted(index for level, index in keys if level == 0)
    nodes = sorted(node_key(level, index) for level, index in keys if level > 0)
    for start in range(0, len(leaves), _CHUNK):
        for position, digest in LogLeaf.objects.filter(
                position__in=leaves[start:start + _CHUNK]).values_list("position", "hash"):
            found[(0, position)] = bytes.fromhex(digest)
    for start in range(0, len(nodes), _CHUNK):
        for key, digest in LogNode.objects.filter(
                key__in=nodes[start:start + _CHUNK]).values_list("key", "hash"):
            found[(key >> _INDEX_BITS, key & ((1 << _INDEX_BITS) - 1))] = bytes.fromhex(digest)
    missing = keys - set(found)
    if missing:
        level, index = min(missing)
        raise TreeCorrupt(f"the stored tree lacks its subtree {level}/{index}")
    return found


def frontier(tree_size: int) -> merkle.Frontier:
    keys = merkle.frontier_keys(tree_size)
    nodes = fetch(keys)
    return merkle.Frontier(tree_size, [nodes[key] for key in keys])


def root(tree_size: int) -> bytes:
    return frontier(tree_size).root()


def inclusion(position: int, tree_size: int) -> list[str]:
    return [h.hex() for h in merkle.hashes_for(merkle.inclusion_ranges(position, tree_size),
                                               fetch)]


def subtrees(positions: Iterable[int], tree_size: int) -> dict[str, str]:
    """A multi-proof: every stored subtree the inclusion paths of ``positions``
    need, once each, as ``{"level/index": hash}`` (wakeledger_verify.merkle.subtree_name)."""
    keys = {key for p in positions for a, b in merkle.inclusion_ranges(p, tree_size)
            for key in merkle.range_keys(a, b)}
    return {merkle.subtree_name(key): digest.hex() for key, digest in fetch(keys).items()}


def consistency(first: int, second: int) -> list[str]:
    return [h.hex() for h in merkle.hashes_for(merkle.consistency_ranges(first, second), fetch)]


def store(completed: Iterable[tuple[Key, bytes]], leaf_events: Mapping[int, int]) -> None:
    """Write what ``Frontier.append`` completed: leaves (with their event ids) and nodes."""
    leaves, nodes = [], []
    for (level, index), digest in completed:
        if level == 0:
            leaves.append(LogLeaf(position=index, event_id=leaf_events[index],
                                  hash=digest.hex()))
        else:
            nodes.append(LogNode(key=node_key(level, index), hash=digest.hex()))
    LogLeaf.objects.bulk_create(leaves, batch_size=_CHUNK)
    LogNode.objects.bulk_create(nodes, batch_size=_CHUNK)


def tail(counted: int) -> dict[str, Any]:
    """What the log accepted beyond its newest signed head: that head's size,
    horizon and time, the newest event's id, and the events above the horizon
    (counted up to ``counted``: a frozen log's backlog is not scanned) with
    the time of the oldest of them."""
    head = TreeHead.objects.order_by("-id").first()
    horizon = head.horizon if head else 0
    unsealed = Event.objects.filter(id__gt=horizon).order_by("id")
    oldest = unsealed.values_list("recorded_at", flat=True).first()
    return {"tree_size": head.size if head else 0, "horizon": horizon,
            "head_timestamp": head.timestamp if head else None,
            "newest_event": Event.objects.order_by("-id").values_list("id", flat=True).first(),
            "unsealed": unsealed[:counted].count(),
            "oldest_unsealed_at": iso(oldest) if oldest else None}


# --------------------------------------------------------------------------- records

EVENT_COLUMNS = ("id", "goal_id", "seq", "kind", "data", "actor", "recorded_at",
                 "idempotency_key", "prev_hash", "hash")


def record(position: int, row: tuple[Any, ...]) -> dict[str, Any]:
    """The leaf record of an event row read with ``EVENT_COLUMNS``."""
    event_id, goal_id, seq, kind, data, actor, recorded_at, key, prev_hash, digest = row
    return records.leaf_record(position, event_id, str(goal_id), seq, kind, data, actor,
                               iso(recorded_at), key, prev_hash, digest)


def event_rows(ids: Iterable[int]) -> dict[int, tuple[Any, ...]]:
    ids = sorted(ids)
    rows: dict[int, tuple[Any, ...]] = {}
    for start in range(0, len(ids), _CHUNK):
        for row in Event.objects.filter(id__in=ids[start:start + _CHUNK]).values_list(
                *EVENT_COLUMNS):
            rows[row[0]] = row
    return rows


def leaf(record_: Mapping[str, Any]) -> bytes:
    return records.record_leaf_hash(record_)

"""Sealing: new events enter the log's tree, and a signed head covers them.

Not the append's work: the hot path writes events exactly as before, and this
step (the scheduler's task every WAKELEDGER_SEAL_MINUTES, or `ledger seal`)
gives each committed event the next tree index, in event-id order, and signs
(size, root, time).

**Only a prefix no transaction in flight can extend.** PostgreSQL hands out
ids when a row is inserted, not when it commits: id 41 can commit after id
42, and a reader that moved its mark past 42 would skip 41 forever (the trap
behind event-store consumers missing events, e.g. Eventuous#222). So the seal
first fixes a *horizon*:

- PostgreSQL: in a transaction of its own, ``LOCK TABLE ledger_event IN SHARE
  MODE`` (it waits for every transaction that has inserted events to end and
  keeps new inserts out while held), read ``max(id)``, commit. Every id up to
  that horizon is now committed or rolled back for good, and every later
  insert gets a larger id. The lock is held for one index lookup; appends
  wait at most for the longest append in flight, once per seal, and a
  ``lock_timeout`` gives up (sealing next time) rather than queue behind a
  stuck transaction.
- SQLite: nothing to do. Writers are serialized (BEGIN IMMEDIATE), ids are
  the largest rowid + 1, so ids grow in commit order, and the seal's own
  write transaction sees everything committed and nothing in flight.

Then events past the last sealed one, up to the horizon, are appended in
batches (each its own short transaction, so a first seal of a large ledger
never holds SQLite's write lock for long). Sealers are serialized by an
advisory lock on PostgreSQL (SQLite's write lock does it there), so two
schedulers never give one position twice.
"""

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, OperationalError, connections, transaction
from django.db.models import Max

from ledger.domain import iso
from ledger.eventstore import clock
from ledger.log import leafcheck, merkle_store, sealer_state, signing, tlog_witness
from ledger.log.sealer_state import LogInconsistent
from ledger.models import Event, LogLeaf, SigningKey, TreeHead
from wakeledger_verify import merkle

logger = logging.getLogger(__name__)

BATCH = 1000  # events per transaction: ~0.15 s of SQLite's write lock at ~7,800 events/s
_LOCK_SEAL = 0x574C0003  # "WL" 3, beside the store's start locks
# While the seal's lock request waits for an append in flight, later appends
# queue behind it: this bounds that stall. An append takes milliseconds; one
# that holds its transaction longer makes this seal give up (next run seals).
LOCK_TIMEOUT = "1s"


class HorizonBusy(Exception):
    """The events table could not be locked in time; nothing was sealed."""


__all__ = ["HorizonBusy", "LogInconsistent", "Sealed", "register_witness", "seal"]


@dataclass(frozen=True)
class Sealed:
    size: int
    appended: int
    head: TreeHead | None  # the new head, or None when the tree did not grow
    witnessed: bool = False  # a registered witness (the webhook) took the new head


# Witnesses outside the database that need the network (the head webhook):
# the scheduling app registers its sender, as it registers the store's
# effects, so `ledger seal` and the scheduled seal push alike and the core
# never imports the shell that sends.
Witness = Callable[[TreeHead], bool]
_witnesses: list[Witness] = []


def register_witness(witness: Witness) -> None:
    if witness not in _witnesses:
        _witnesses.append(witness)


def seal(*, batch: int = BATCH, sign: bool = True) -> Sealed:
    horizon = _horizon()
    appended = 0
    while True:
        with transaction.atomic():
            _serialize_sealers()
            count = _append_batch(horizon, batch)
        appended += count
        if count < batch:
            break
    if sign:
        # The tree must extend the sealer's record (the same check _sign makes
        # under its lock, first here so a changed tree is named as such); then
        # a sealed event rewritten by SQL (its goal's chain recomputed) is
        # found without any head kept outside: it no longer gives its stored
        # leaf (ledger/log/leafcheck.py). The alarm, and no head over it.
        tree_size = merkle_store.size()
        _check_extends_record(tree_size, merkle_store.root(tree_size) if tree_size
                              else merkle.EMPTY_ROOT)
        leafcheck.check()
    head = _sign() if sign else None
    witnessed = head is not None and any([witness(head) for witness in _witnesses])
    return Sealed(merkle_store.size(), appended, head, witnessed)


def _horizon() -> int | None:
    """The largest id no transaction still in flight can go below (PostgreSQL),
    or None (SQLite: the seal's own transaction is the horizon)."""
    conn = connections[DEFAULT_DB_ALIAS]
    if conn.vendor != "postgresql":
        return None
    table = Event._meta.db_table
    try:
        with transaction.atomic(), conn.cursor() as cursor:
            cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            cursor.execute(f"LOCK TABLE {table} IN SHARE MODE")
            cursor.execute(f"SELECT COALESCE(MAX(id), 0) FROM {table}")
            return cursor.fetchone()[0]
    except OperationalError as error:  # lock_timeout: an append stuck in flight
        raise HorizonBusy(f"could not lock {table} within {LOCK_TIMEOUT}: {error}") from None


def _serialize_sealers() -> None:
    conn = connections[DEFAULT_DB_ALIAS]
    if conn.vendor == "postgresql":
        with conn.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK_SEAL])


def _append_batch(horizon: int | None, batch: int) -> int:
    last = LogLeaf.objects.order_by("-position").values_list("position", "event_id").first()
    tree_size, after = (0, 0) if last is None else (last[0] + 1, last[1])
    events = Event.objects.filter(id__gt=after).order_by("id")
    if horizon is not None:
        events = events.filter(id__lte=horizon)
    rows = list(events.values_list(*merkle_store.EVENT_COLUMNS)[:batch])
    if not rows:
        return 0
    frontier = merkle_store.frontier(tree_size)
    completed, leaf_events = [], {}
    for offset, row in enumerate(rows):
        position = tree_size + offset
        leaf_events[position] = row[0]
        completed += frontier.append(merkle_store.leaf(merkle_store.record(position, row)))
    merkle_store.store(completed, leaf_events)
    return len(rows)


def _sign() -> TreeHead | None:
    with transaction.atomic():
        _serialize_sealers()
        tree_size = merkle_store.size()
        root = merkle_store.root(tree_size) if tree_size else merkle.EMPTY_ROOT
        _check_extends_record(tree_size, root)
        latest = TreeHead.objects.order_by("-id").first()
        if tree_size == 0 or (latest is not None and latest.size == tree_size
                              and latest.checkpoint):
            return None
        # Every event up to the last sealed one is in the tree: sealing takes
        # events in id order and only below a horizon (see above).
        horizon = LogLeaf.objects.aggregate(last=Max("event_id"))["last"] or 0
        key = signing.signer()
        fields = {"size": tree_size, "root": root.hex(),
                  "timestamp": iso(clock.now()), "key_id": key.key_id, "horizon": horizon}
        checkpoint = key.checkpoint(tree_size, root)
        head = TreeHead.objects.create(**fields, signature=key.sign(fields),
                                       checkpoint=checkpoint)
        SigningKey.objects.get_or_create(key_id=key.key_id, defaults={
            "public_key": key.public_pem, "first_used_at": clock.now()})
        # The C2SP witnesses' submission, sent after the commit (an outbox row).
        tlog_witness.enqueue()
        # Remembered outside the database before the head is committed: a
        # failed write signs nothing; a failed commit leaves a record the
        # committed tree still extends (same size, same root).
        sealer_state.write(checkpoint)
    sealer_state.clear_alarm()
    _witness(head)
    return head


def _check_extends_record(tree_size: int, root: bytes) -> None:
    """The stored tree must extend the sealer's latest signed checkpoint: a
    consistency proof from it (made of stored nodes, so a forged node can only
    make the check fail, never pass for a tree that does not extend it)."""
    kept = sealer_state.read()
    if kept is None:
        return  # the first seal, or a record switched off: trust on first use
    if kept.origin != settings.WAKELEDGER_LOG_ORIGIN:
        raise sealer_state.raise_alarm(
            f"the sealer's record names the log {kept.origin!r}, this server "
            f"{settings.WAKELEDGER_LOG_ORIGIN!r}")
    if tree_size < kept.size:
        raise sealer_state.raise_alarm(
            f"the tree has {tree_size} leaves, fewer than the {kept.size} the sealer last "
            "signed: it was truncated or rolled back")
    if tree_size == kept.size:
        consistent = root == kept.root
    else:
        try:
            proof = [bytes.fromhex(h) for h in merkle_store.consistency(kept.size, tree_size)]
        except merkle_store.TreeCorrupt as error:
            raise sealer_state.raise_alarm(f"the stored tree is damaged: {error}") from None
        consistent = merkle.consistent(kept.size, kept.root, tree_size, root, proof)
    if not consistent:
        raise sealer_state.raise_alarm(
            f"the tree of {tree_size} leaves (root {root.hex()}) does not extend the "
            f"checkpoint the sealer last signed (size {kept.size}, root {kept.root.hex()}): "
            "leaves it covered were changed, removed or reordered")


def _witness(head: TreeHead) -> None:
    """Append the head to the operator's witness file, outside the database:
    a rewrite of the database cannot reach the heads already written there."""
    path = settings.WAKELEDGER_HEAD_WITNESS_FILE
    if not path:
        return
    try:
        with Path(path).open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(head.as_dict(), sort_keys=True) + "\n")
    except OSError as error:  # the head is signed and stored; the witness is best effort
        logger.warning("could not append the tree head to %s: %s", path, error)

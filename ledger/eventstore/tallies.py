"""The counters behind the metrics (docs/metrics.md): kept in step with the
events, in the transaction that appends them.

A scrape must stay cheap at a million goals, so the numbers that come from
events (deadline misses, claims by outcome, dispatch results, continuations
charged, the wake-lateness histogram) are never counted over the events
table: ``count``, called by the store in each command's transaction, adds
each command's events to a few ``Tally`` rows (one upsert statement, only
for the kinds counted), and a scrape reads those rows.

Why in the append's transaction and not a reader catching up from a stored
position: PostgreSQL hands out event ids at insert, not at commit, so a
reader moving a mark past id 42 can miss 41 committing later (what the
sealer's horizon lock is for, ledger/log/sealing.py); a lock per scrape, or
counting only sealed events (minutes late), was worse than one upsert on the
few commands that append a counted kind. The cost on PostgreSQL: the tally
rows a command bumps are locked from the effect (the end of the
transaction) to its commit, so concurrent claims serialize on their commit;
rows are bumped in one sorted statement so two commands never deadlock.

Goals by status and reason are tallies too (``ACTIVE`` and ``ENDED``): a
scrape reads a few rows however many goals there are. They move only
when a command changes a goal's (status, reason) — its start, a lease taken
or released, a block, its end, a recovery — never on a heartbeat or a
checkpoint, so the hot path pays no statement for them. ``replay --fix``
moves them when it rewrites a projection's status (``move``), and
``drift``/``recount`` compare them with (and reset them to) a COUNT of the
goal table: ``ledger doctor`` reports a disagreement, ``--fix`` recounts.

Every status change of every goal would otherwise bump the same two rows
(``running`` and ``waiting``): on PostgreSQL concurrent leases taken and
released then serialize on one row lock held to each commit (docs/metrics.md
has the measurement). So a goal's moves go to one of ``SHARDS`` rows per
(status, reason), chosen by its id (a stable CRC-32, so its moves in and
out always meet the same shard): two goals share a row only when they share
a shard. A (status, reason) is the
sum of its rows; the shard-less row is what a count (the migration,
``recount``) writes, after which a shard row may go below zero, and only the
sum means anything.
"""

import zlib
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import DEFAULT_DB_ALIAS, connections, transaction

from ledger.domain import kinds, timing
from ledger.domain.state import TERMINAL_STATUSES
from ledger.eventstore import appendsql
from ledger.models import Goal, Tally

if TYPE_CHECKING:
    from ledger.eventstore.store import Outcome

DEADLINE_MISSES = "deadline_misses"
CLAIMS = "claims"
DISPATCHES = "dispatches"
CHARGED = "continuations_charged"
LATENESS = "wake_lateness"
# Ended goals by status and reason: bumped when a goal ends and when a
# recovered one leaves its end; counted once by migrations 0010 and 0016.
ENDED = "goals_ended"
# Active goals by status and reason: moved with every change of a goal's
# (status, reason), its start included; counted once by migration 0017. A
# scrape reads both instead of counting goals (docs/metrics.md).
ACTIVE = "goals_active"
GOAL_TALLIES = (ACTIVE, ENDED)
# Rows per goal tally and (status, reason) (the module doc: hot rows).
SHARDS = 16
# Seconds from a wake's due time to its claim. django-q2 looks at its
# schedule every 30 s, so most claims land in the first buckets; an hour or
# more means the scheduler was down.
LATENESS_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0, 14400.0)
INF = "+Inf"
# Claims that did nothing (a duplicate, an early fire, a receipt asked for)
# have no lateness: the wake they stand for was, or will be, claimed.
_NOT_A_CLAIM = frozenset({"already_claimed", "not_due", "receipt_required"})


def labels(**values: str) -> str:
    """A tally's labels as stored: ``k=v`` pairs sorted by name (values are
    the domain's own words, never free text)."""
    return ",".join(f"{key}={values[key]}" for key in sorted(values))


def parse_labels(text: str) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in text.split(",")) if text else {}


def bucket_of(seconds: float) -> str:
    """The one bucket an observation is stored in (scrapes add them up)."""
    return next((f"{bound:g}" for bound in LATENESS_BUCKETS if seconds <= bound), INF)


def shard_of(goal_id: str) -> str:
    """The goal's shard of its goal tallies: stable across processes and
    versions (not ``hash()``, which is salted per process)."""
    return str(zlib.crc32(goal_id.encode()) % SHARDS)


def goal_key(status: str, reason: str, shard: str = "") -> tuple[str, str] | None:
    """The tally row a goal of this status and reason is counted in (its
    shard's, or with none the shard-less row a count writes); None before
    its start (``GoalState().status`` is "": no goal yet, nothing to count)."""
    if not status:
        return None
    name = ENDED if status in TERMINAL_STATUSES else ACTIVE
    if shard:
        return name, labels(reason=reason, shard=shard, status=status)
    return name, labels(reason=reason, status=status)


def unsharded(label: str) -> str:
    """A goal tally's labels without its shard: the (status, reason) it counts."""
    found = parse_labels(label)
    return labels(reason=found["reason"], status=found["status"])


def moved(goal_id: str, before: tuple[str, str],
          after: tuple[str, str]) -> Counter[tuple[str, str]]:
    """A goal going from (status, reason) ``before`` to ``after``: -1 and +1
    in its shard's rows (nothing when they are equal)."""
    added: Counter[tuple[str, str]] = Counter()
    if before != after:
        shard = shard_of(goal_id)
        old, new = goal_key(*before, shard), goal_key(*after, shard)
        if old:
            added[old] -= 1
        if new:
            added[new] += 1
    return added


def deltas(outcome: "Outcome") -> Counter[tuple[str, str]]:
    """What one command adds to each tally, read from its typed events."""
    before, after = outcome.before, outcome.state
    added = moved(after.goal_id, (before.status, before.reason), (after.status, after.reason))
    for stored in outcome.events:
        payload = stored.payload
        if isinstance(payload, kinds.LivenessMissed):
            added[DEADLINE_MISSES, labels(reason=payload.reason)] += 1
        elif isinstance(payload, kinds.ContinuationCharged):
            added[CHARGED, ""] += 1
        elif isinstance(payload, kinds.ContinuationDispatched):
            result = "ok" if payload.ok else "uncertain" if payload.uncertain else "failed"
            added[DISPATCHES, labels(result=result, dispatcher=payload.dispatcher)] += 1
        elif isinstance(payload, kinds.WakeClaimed):
            added[CLAIMS, labels(outcome=payload.outcome, source=payload.source)] += 1
            late = lateness(payload, outcome, stored.recorded_at)
            if late is not None:
                added[f"{LATENESS}_bucket", labels(le=bucket_of(late))] += 1
                added[f"{LATENESS}_sum", ""] += late
                added[f"{LATENESS}_count", ""] += 1
    return added


def lateness(claim: kinds.WakeClaimed, outcome: "Outcome", at: datetime) -> float | None:
    """Seconds from the wake's due time to its claim: the recurring slot it
    belongs to, or the one-off wake the goal was waiting for. None when the
    claim stands for no due wake (an operator's wake now, a duplicate)."""
    if claim.source == "operator" or claim.outcome in _NOT_A_CLAIM:
        return None
    due = datetime.fromisoformat(claim.slot) if claim.slot else timing.next_wake_at(outcome.before)
    if due is None:
        return None
    return max(0.0, (at - due).total_seconds())


def count(goal_id: str, outcome: "Outcome") -> None:
    """The command's counted events (and a goal's change of
    status) added to their tallies, in one statement (none for the others)."""
    before, after = outcome.before, outcome.state
    if before.status == after.status and before.reason == after.reason:
        for stored in outcome.events:
            if isinstance(stored.payload, _COUNTED):
                break
        else:
            return  # most commands (a checkpoint, a heartbeat): nothing to count
    add(deltas(outcome))


# The payloads ``deltas`` counts (beside a change of status or reason).
_COUNTED = (kinds.LivenessMissed, kinds.ContinuationCharged, kinds.ContinuationDispatched,
            kinds.WakeClaimed)


def move(goal_id: str, before: tuple[str, str], after: tuple[str, str]) -> None:
    """A goal's (status, reason) rewritten outside a command (``replay
    --fix``): its goal tallies moved, in the caller's transaction."""
    add(moved(goal_id, before, after))


def add(deltas_: Mapping[tuple[str, str], float]) -> None:
    """Add to the tallies in one upsert statement (none when all are zero),
    through this database's recorder (``appendsql``), as the events are."""
    added = {key: delta for key, delta in deltas_.items() if delta}
    if not added:
        return
    conn = connections[DEFAULT_DB_ALIAS]
    if conn.connection is None:
        conn.ensure_connection()
    # Sorted: one lock order for every command, so no deadlock.
    rows = [(name, label, float(delta)) for (name, label), delta in sorted(added.items())]
    appendsql.recorder_for(conn).add_tallies(conn, rows)


def read() -> dict[str, dict[str, float]]:
    """Every tally: {name: {labels: value}} (a few dozen rows at most)."""
    found: dict[str, dict[str, float]] = {}
    for name, label, value in Tally.objects.values_list("name", "labels", "value"):
        found.setdefault(name, {})[label] = value
    return found


# ---------------------------------------------------------------- drift


def goal_sums(found: dict[str, float]) -> dict[str, float]:
    """A goal tally's rows ({labels: value}) summed by (status, reason)."""
    sums: dict[str, float] = {}
    for label, value in found.items():
        key = unsharded(label)
        sums[key] = sums.get(key, 0.0) + value
    return sums


def _goal_counts_and_tallies() -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]]]:
    """(counted, tallied) goals by tally and (status, reason), the shards
    summed: a GROUP BY over the goal table and the goal tallies' rows, read
    in ONE statement, so one snapshot. A command
    writes its goal row and its tallies in one transaction, so any snapshot
    sees both or neither: no lock is needed to compare them (O(goals): the
    doctor's, never the scrape's)."""
    conn = connections[DEFAULT_DB_ALIAS]
    goal = conn.ops.quote_name(Goal._meta.db_table)
    table = conn.ops.quote_name(Tally._meta.db_table)
    counted: Counter[tuple[str, str]] = Counter()
    tallied: Counter[tuple[str, str]] = Counter()
    with conn.cursor() as cursor:
        cursor.execute(
            f"SELECT 0, status, reason, COUNT(*) FROM {goal} GROUP BY status, reason "  # noqa: S608
            f"UNION ALL SELECT 1, name, labels, value FROM {table} WHERE name IN (%s, %s)",
            list(GOAL_TALLIES))
        for side, first, second, value in cursor.fetchall():
            if side == 0:
                key = goal_key(first, second)
                if key:
                    counted[key] += int(value)
            else:
                tallied[first, unsharded(second)] += float(value)
    return counted, tallied


def drift() -> dict[tuple[str, str], tuple[float, float]]:
    """{(tally, labels): (tallied, counted)} for every goal tally that a
    COUNT of the goal table disagrees with (empty when in step)."""
    counted, tallied = _goal_counts_and_tallies()
    return {key: (float(tallied[key]), float(counted[key]))
            for key in sorted(set(counted) | set(tallied)) if tallied[key] != counted[key]}


def recount() -> dict[tuple[str, str], tuple[float, float]]:
    """Set the goal tallies to a COUNT of the goal table (each (status,
    reason) in its shard-less row, its shards' rows zero); returns what was
    wrong, as ``drift`` says it.

    Exact under concurrent commands: on PostgreSQL the tally table is locked
    against writers first (SHARE ROW EXCLUSIVE: every upsert waits), so a
    command that changed a goal's status but has not committed is in
    neither the count nor the tallies, and adds its move once this commits;
    on SQLite the transaction holds the one write lock from its BEGIN."""
    conn = connections[DEFAULT_DB_ALIAS]
    with transaction.atomic():
        if conn.vendor == "postgresql":
            with conn.cursor() as cursor:
                cursor.execute(f"LOCK TABLE {conn.ops.quote_name(Tally._meta.db_table)} "
                               "IN SHARE ROW EXCLUSIVE MODE")
        wrong = drift()
        if wrong:
            counted, _tallied = _goal_counts_and_tallies()
            Tally.objects.filter(name__in=GOAL_TALLIES).update(value=0)
            for (name, label), n in counted.items():
                Tally.objects.update_or_create(name=name, labels=label, defaults={"value": n})
    return wrong

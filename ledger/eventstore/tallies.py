"""The counters behind the metrics (docs/metrics.md): kept in step with the
events, in the transaction that appends them.

A scrape must stay cheap at a million goals, so the numbers that come from
events (deadline misses, claims by outcome, dispatch results, continuations
charged, the wake-lateness histogram) are never counted over the events
table: ``count`` is a store effect that adds each command's events to a few
``Tally`` rows (one upsert statement, only for the kinds counted), and a
scrape reads those rows.

Why in the append's transaction and not a reader catching up from a stored
position: PostgreSQL hands out event ids at insert, not at commit, so a
reader moving a mark past id 42 can miss 41 committing later (what the
sealer's horizon lock is for, ledger/log/sealing.py); a lock per scrape, or
counting only sealed events (minutes late), was worse than one upsert on the
few commands that append a counted kind. The cost on PostgreSQL: the tally
rows a command bumps are locked from the effect (the end of the
transaction) to its commit, so concurrent claims serialize on their commit;
rows are bumped in one sorted statement so two commands never deadlock.
"""

from collections import Counter
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import DEFAULT_DB_ALIAS, connections

from ledger.domain import events, timing
from ledger.domain.state import TERMINAL_STATUSES
from ledger.models import Tally

if TYPE_CHECKING:
    from ledger.eventstore.store import Outcome

DEADLINE_MISSES = "deadline_misses"
CLAIMS = "claims"
DISPATCHES = "dispatches"
CHARGED = "continuations_charged"
LATENESS = "wake_lateness"
# Ended goals by status and reason: they only grow, so a scrape must not
# count them (the active ones it counts on the index, ledger/operators/metrics.py).
# Bumped when a goal ends and when a recovered one leaves its end; the goals
# that had ended before the tallies existed were counted by their migration.
ENDED = "goals_ended"
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


def deltas(outcome: "Outcome") -> Counter[tuple[str, str]]:
    """What one command adds to each tally, read from its typed events."""
    added: Counter[tuple[str, str]] = Counter()
    before, after = outcome.before, outcome.state
    if (before.status, before.reason) != (after.status, after.reason):
        if before.status in TERMINAL_STATUSES:
            added[ENDED, labels(reason=before.reason, status=before.status)] -= 1
        if after.status in TERMINAL_STATUSES:
            added[ENDED, labels(reason=after.reason, status=after.status)] += 1
    for stored in outcome.events:
        payload = stored.payload
        if isinstance(payload, events.LivenessMissed):
            added[DEADLINE_MISSES, labels(reason=payload.reason)] += 1
        elif isinstance(payload, events.ContinuationCharged):
            added[CHARGED, ""] += 1
        elif isinstance(payload, events.ContinuationDispatched):
            result = "ok" if payload.ok else "uncertain" if payload.uncertain else "failed"
            added[DISPATCHES, labels(result=result, dispatcher=payload.dispatcher)] += 1
        elif isinstance(payload, events.WakeClaimed):
            added[CLAIMS, labels(outcome=payload.outcome, source=payload.source)] += 1
            late = lateness(payload, outcome, stored.recorded_at)
            if late is not None:
                added[f"{LATENESS}_bucket", labels(le=bucket_of(late))] += 1
                added[f"{LATENESS}_sum", ""] += late
                added[f"{LATENESS}_count", ""] += 1
    return added


def lateness(claim: events.WakeClaimed, outcome: "Outcome", at: datetime) -> float | None:
    """Seconds from the wake's due time to its claim: the recurring slot it
    belongs to, or the one-off wake the goal was waiting for. None when the
    claim stands for no due wake (an operator's wake now, a duplicate)."""
    if claim.source == "operator" or claim.outcome in _NOT_A_CLAIM:
        return None
    due = claim.slot or timing.next_wake_at(outcome.before)
    if not due:
        return None
    return max(0.0, (at - datetime.fromisoformat(due)).total_seconds())


def count(goal_id: str, outcome: "Outcome") -> None:
    """Store effect: the command's counted events (and a goal ending) added
    to their tallies, in one statement (none for the other commands)."""
    added = {key: delta for key, delta in deltas(outcome).items() if delta}
    if not added:
        return
    conn = connections[DEFAULT_DB_ALIAS]
    table = conn.ops.quote_name(Tally._meta.db_table)
    p = "%s"
    rows = sorted(added.items())  # one lock order for every command: no deadlock
    values = ", ".join([f"({p}, {p}, {p})"] * len(rows))
    with conn.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (name, labels, value) VALUES {values} "  # noqa: S608
            f"ON CONFLICT (name, labels) DO UPDATE SET value = {table}.value + excluded.value",
            [item for (name, label), delta in rows for item in (name, label, float(delta))])


def read() -> dict[str, dict[str, float]]:
    """Every tally: {name: {labels: value}} (a few dozen rows at most)."""
    found: dict[str, dict[str, float]] = {}
    for name, label, value in Tally.objects.values_list("name", "labels", "value"):
        found.setdefault(name, {})[label] = value
    return found

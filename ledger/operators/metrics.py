"""What ``/metrics`` reports (docs/metrics.md): one Prometheus collector that
reads every number from the database at scrape time.

Not process-global counters: under gunicorn each worker would count only
the requests it served and a scrape would see whichever worker answered.
Every number here is read from the database, so every web process answers
the same. What one scrape costs (docs/metrics.md has the measurements):

- goals by status and reason: the ``goals_active`` and ``goals_ended``
  tallies the store moves whenever a command changes a goal's status or
  reason (a few rows, however many goals; ``ledger doctor`` checks them
  against a COUNT);
- alerts by reason: ``alerts.counts_by_reason``, the /alerts query's
  COUNT (the partial attention index and the deadline index);
- deadline misses, claims, dispatches, charges, wake lateness: the
  ``Tally`` rows the store keeps in step with the events (ledger/eventstore/tallies.py);
- seal lag: three primary-key lookups; the sweeper's age: one row;
- the log's alarm: one file read beside the signing key; each configured
  witness's lag: two indexed lookups per witness (``services.loghealth``).
"""

import math
from collections.abc import Iterator
from datetime import datetime

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from ledger.domain import liveness
from ledger.domain.vocabulary import CLOCK_SKEW
from ledger.eventstore import clock, tallies
from ledger.models import Goal, SchedulerBeat
from ledger.services import alerts, loghealth
from ledger.services.notifications import delivered_by_channel

PREFIX = "wakeledger_"


def notification_counts() -> dict[tuple[str, str], float]:
    """Notifications sent and failed, {(channel, result): count}, result one
    of "sent" | "failed" (docs/notifications.md): one GROUP BY over the
    notifications' outbox."""
    return {key: float(n) for key, n in delivered_by_channel().items()}


class LedgerCollector(Collector):
    """Every ``wakeledger_`` metric, read from the database when scraped."""

    def __init__(self, now: datetime | None = None) -> None:
        self.now = now

    def collect(self) -> Iterator[Metric]:
        now = self.now or clock.now()
        counts = tallies.read()
        yield from goals({**tallies.goal_sums(counts.get(tallies.ACTIVE, {})),
                          **tallies.goal_sums(counts.get(tallies.ENDED, {}))})
        yield from alert_counts(now)
        yield from counted(counts)
        yield from seal_lag(now)
        yield from log_health(now)
        yield from sweeper(now)
        yield from notifications(notification_counts())


def registry(now: datetime | None = None) -> CollectorRegistry:
    """A registry holding only the ledger's collector (none of the client
    library's process metrics: they would differ per worker)."""
    found = CollectorRegistry(auto_describe=False)
    found.register(LedgerCollector(now))
    return found


def goals(tallied: dict[str, float]) -> Iterator[Metric]:
    """Goals by status and reason, from their tallies' sums ({labels:
    value}; the active and the ended ones never share labels: the status
    differs). A (status, reason) no goal has any more reads 0: a series that
    vanished would read as "no data" on a graph and in an alert rule, not as
    none (docs/metrics.md)."""
    family = GaugeMetricFamily(f"{PREFIX}goals", "Goals by status and reason.",
                               labels=["status", "reason"])
    for text, value in sorted(tallied.items()):
        found = tallies.parse_labels(text)
        family.add_metric([found["status"], found["reason"]], value)
    yield family


def alert_counts(now: datetime) -> Iterator[Metric]:
    family = GaugeMetricFamily(f"{PREFIX}alerts", "Goals that need a human, by reason "
                               "(the /alerts list's count).", labels=["reason"])
    # Every reason a goal can be listed for, 0 when none is: "nothing needs a
    # human" is a 0, not a series that is gone.
    found = {reason: 0 for reason in liveness.WHY}
    found.update(alerts.counts_by_reason(Goal.objects.all(), now))
    for reason, n in sorted(found.items()):
        family.add_metric([reason], n)
    yield family


def counted(found: dict[str, dict[str, float]]) -> Iterator[Metric]:
    """The counters and the histogram the store keeps (tallies)."""
    for name, help_text, label_names in (
            (tallies.DEADLINE_MISSES, "Deadlines missed (liveness.missed events), by reason.",
             ["reason"]),
            (tallies.CLAIMS, "Wake claims, by outcome and source (wake.claimed events).",
             ["outcome", "source"]),
            (tallies.DISPATCHES, "Dispatches of a continuation, by result and dispatcher "
             "(continuation.dispatched events).", ["dispatcher", "result"]),
            (tallies.CHARGED, "Continuations charged to goals' budgets "
             "(continuation.charged events).", [])):
        family = CounterMetricFamily(f"{PREFIX}{name}", help_text, labels=label_names)
        rows = found.get(name, {})
        if not label_names and not rows:
            rows = {"": 0.0}  # a counter without labels starts at 0, not absent
        for text, value in sorted(rows.items()):
            values = tallies.parse_labels(text)
            family.add_metric([values.get(label, "") for label in label_names], value)
        yield family
    buckets = found.get(f"{tallies.LATENESS}_bucket", {})
    cumulative, running = [], 0.0
    for bound in [*(f"{b:g}" for b in tallies.LATENESS_BUCKETS), tallies.INF]:
        running += buckets.get(tallies.labels(le=bound), 0.0)
        cumulative.append((bound, running))
    histogram = HistogramMetricFamily(
        f"{PREFIX}wake_lateness_seconds", "Seconds from a wake's due time to its claim.",
        labels=[])
    histogram.add_metric([], cumulative, found.get(f"{tallies.LATENESS}_sum", {}).get("", 0.0))
    yield histogram


def seal_lag(now: datetime) -> Iterator[Metric]:
    """Events not yet under a signed tree head: how many (by id) and how long
    the oldest has waited. Primary-key lookups only."""
    events, seconds = loghealth.seal_lag(now)
    yield GaugeMetricFamily(f"{PREFIX}seal_lag_events", "Events recorded after the last "
                            "signed tree head's horizon (by event id).", value=events)
    yield GaugeMetricFamily(f"{PREFIX}seal_lag_seconds", "How long the oldest event not under "
                            "a signed head has waited (0 when all are sealed).", value=seconds)


def log_health(now: datetime) -> Iterator[Metric]:
    """The sealer's alarm (1 while raised: it signs no head) and, per
    configured witness, how far behind its cosignatures are. Every witness is
    a series from the start (0 when up to date), never absent."""
    yield GaugeMetricFamily(f"{PREFIX}log_alarm", "1 while the verifiable log's alarm is "
                            "raised (the sealer signs no head; docs/integrity.md), else 0.",
                            value=1 if loghealth.log_alarm() else 0)
    found = loghealth.witnesses(now)
    leaves = GaugeMetricFamily(f"{PREFIX}witness_lag_leaves", "Leaves of the newest signed "
                               "head a witness has not cosigned.", labels=["witness"])
    seconds = GaugeMetricFamily(f"{PREFIX}witness_lag_seconds", "How long the oldest signed "
                                "head a witness has not cosigned has waited (0: up to date).",
                                labels=["witness"])
    rolled = GaugeMetricFamily(f"{PREFIX}witness_rollback", "1 when a witness has cosigned "
                               "more leaves than the log holds now (a rollback).",
                               labels=["witness"])
    for witness in found:
        leaves.add_metric([witness.name], witness.lag_leaves)
        seconds.add_metric([witness.name], witness.lag_seconds)
        rolled.add_metric([witness.name], 1 if witness.rolled_back else 0)
    yield from (leaves, seconds, rolled)


def sweeper(now: datetime) -> Iterator[Metric]:
    """The sweeper's heartbeat: +Inf seconds when no sweep ever completed."""
    last = SchedulerBeat.objects.filter(name=alerts.SWEEPER) \
        .values_list("at", flat=True).first()
    # A pass dated in the future (the clock ran ahead and was set back) is no
    # evidence of a sweep since: +Inf, as health reads it silent, never a
    # negative age that an "age > N" alert rule takes for fresh.
    known = last is not None and last <= now + CLOCK_SKEW
    yield GaugeMetricFamily(f"{PREFIX}last_sweep_age_seconds", "Seconds since the liveness "
                            "sweeper last completed a pass (+Inf: never).",
                            value=(now - last).total_seconds() if known else math.inf)


def notifications(found: dict[tuple[str, str], float]) -> Iterator[Metric]:
    family = CounterMetricFamily(f"{PREFIX}notifications", "Notifications sent or failed, by "
                                 "channel.", labels=["channel", "result"])
    for (channel, result), value in sorted(found.items()):
        family.add_metric([channel, result], value)
    yield family

"""/metrics (docs/metrics.md): who may scrape, and that every number comes
from the database — goals and alerts by indexed aggregates, the event
counters and the wake-lateness histogram from the tallies the store keeps in
the events' own transaction."""

import math
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from ledger.domain.vocabulary import TERMINAL_STATUSES
from ledger.eventstore import tallies
from ledger.models import Tally
from ledger.operators.metrics import LedgerCollector
from scheduling import tasks
from tests.factories import lease_of

SCRAPE_TOKEN = "s" * 40


def scrape(client: APIClient) -> dict[tuple[str, tuple], float]:
    answer = client.get("/metrics")
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"].startswith("text/plain")
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(answer.content.decode())
            for sample in family.samples}


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.mark.django_db
def test_auditors_operators_and_the_scrape_token_may_scrape_nobody_else(agent, auditor,
                                                                        operator):
    assert APIClient().get("/metrics").status_code == 401
    assert bearer(agent.token).get("/metrics").status_code == 403
    assert bearer(auditor.token).get("/metrics").status_code == 200
    assert bearer(operator.token).get("/metrics").status_code == 200
    # No scrape token configured: any value is just a bad API token.
    assert bearer(SCRAPE_TOKEN).get("/metrics").status_code == 401
    with override_settings(WAKELEDGER_METRICS_TOKEN=SCRAPE_TOKEN):
        assert bearer(SCRAPE_TOKEN).get("/metrics").status_code == 200
        # Whatever the scraper accepts.
        for accept in ("text/plain", "application/openmetrics-text; version=1.0.0"):
            answer = bearer(SCRAPE_TOKEN).get("/metrics", HTTP_ACCEPT=accept)
            assert answer.status_code == 200 and b"wakeledger_goals" in answer.content
        refused = APIClient().get("/metrics", HTTP_ACCEPT="text/plain")
        assert refused.status_code == 401 and refused["WWW-Authenticate"].startswith("Bearer")
        assert refused.json()["code"] == "unauthenticated"
        assert bearer(SCRAPE_TOKEN[:-1] + "t").get("/metrics").status_code == 401
        # The API tokens still work beside it.
        assert bearer(auditor.token).get("/metrics").status_code == 200


@pytest.mark.django_db
def test_goals_alerts_sweeper_and_seal_lag_are_read_from_the_database(started, agent, auditor,
                                                                      operator, clock):
    first, _ = started()
    agent_second = agent.start(goal_key="issue-2", workspace="/srv/repos/other",
                               policy={"lease_seconds": 300})
    assert agent_second.status_code == 201
    before = scrape(bearer(auditor.token))
    assert before["wakeledger_goals", (("reason", ""), ("status", "running"))] == 2
    # Never swept: +Inf, which the example rule treats as silent.
    assert math.isinf(before["wakeledger_last_sweep_age_seconds", ()])
    assert before["wakeledger_seal_lag_events", ()] > 0
    assert ("wakeledger_alerts", (("reason", "operator_stopped"),)) not in before

    operator.post(f"goals/{first}/stop", {"reason": "wrong repository"})
    tasks.sweep_leases()  # beats
    clock.advance(seconds=90)
    after = scrape(bearer(auditor.token))
    assert after["wakeledger_goals", (("reason", ""), ("status", "running"))] == 1
    stopped = {labels: n for (name, labels), n in after.items()
               if name == "wakeledger_goals" and dict(labels)["status"] != "running"}
    assert sum(stopped.values()) == 1
    assert after["wakeledger_last_sweep_age_seconds", ()] == 90
    assert after["wakeledger_seal_lag_seconds", ()] >= 90


@pytest.mark.django_db
def test_claims_charges_dispatches_and_lateness_are_counted_with_their_events(
        agent, auditor, clock, settings, tmp_path):
    settings.WAKELEDGER_DISPATCHERS = {"cmd": {"type": "command", "argv": ["/bin/true"]}}
    settings.WAKELEDGER_RUNS_DIR = tmp_path / "runs"
    body = agent.start(policy={"dispatch": "cmd", "lease_seconds": 300}).json()
    gid = body["goal"]["id"]
    agent.post(f"goals/{gid}/watchdog", {"lease": lease_of(body)})
    clock.advance(hours=1, minutes=1)
    assert tasks.fire_watchdog(gid, intended_date="occ-1") == "recurring_acquired"
    assert tasks.fire_watchdog(gid, intended_date="occ-1") == "already_claimed"

    found = scrape(bearer(auditor.token))
    assert found["wakeledger_claims_total", (("outcome", "recurring_acquired"),
                                             ("source", "internal"))] == 1
    # A duplicate fire records nothing, so counts nothing.
    assert not [labels for name, labels in found if name == "wakeledger_claims_total"
                and dict(labels)["outcome"] != "recurring_acquired"]
    assert found["wakeledger_continuations_charged_total", ()] == 1
    assert found["wakeledger_dispatches_total", (("dispatcher", "cmd"), ("result", "ok"))] == 1
    assert found["wakeledger_wake_lateness_seconds_count", ()] == 1
    late = found["wakeledger_wake_lateness_seconds_sum", ()]
    assert 0 <= late <= 3600
    buckets = {dict(labels)["le"]: n for (name, labels), n in found.items()
               if name == "wakeledger_wake_lateness_seconds_bucket"}
    assert buckets["+Inf"] == 1
    assert all(n == (1 if float(le) >= late else 0) for le, n in buckets.items())


@pytest.mark.django_db
def test_a_deadline_miss_is_counted_once_by_reason(agent, auditor, clock):
    body = agent.start(policy={"lease_seconds": 300}).json()
    # A host goal whose host never reports: the sweeper records HOST_SILENT.
    agent.post(f"goals/{body['goal']['id']}/watchdog",
               {"lease": lease_of(body), "backend": "host", "cadence_minutes": 15})
    clock.advance(hours=2)
    tasks.sweep_leases()
    tasks.sweep_leases()
    misses = {dict(labels)["reason"]: n for (name, labels), n in
              scrape(bearer(auditor.token)).items() if name == "wakeledger_deadline_misses_total"}
    assert misses and all(n >= 1 for n in misses.values())
    assert sum(misses.values()) == Tally.objects.get(
        name=tallies.DEADLINE_MISSES, labels=tallies.labels(reason=next(iter(misses)))).value


def test_an_observation_lands_in_exactly_one_bucket():
    assert tallies.bucket_of(0) == "1"
    assert tallies.bucket_of(1) == "1"
    assert tallies.bucket_of(1.5) == "5"
    assert tallies.bucket_of(timedelta(days=1).total_seconds()) == tallies.INF
    assert tallies.parse_labels(tallies.labels(source="host", outcome="x")) == {
        "outcome": "x", "source": "host"}


@pytest.mark.django_db
def test_alert_counts_by_reason_agree_with_the_one_query(clock):
    """``counts_by_reason`` counts ``needing_a_human``'s two halves on their
    own indexes: per reason, the same goals as the rows the list shows."""
    import itertools
    import uuid

    from ledger.domain import liveness
    from ledger.models import Goal
    from ledger.services import alerts

    now = clock()
    past, future = now - timedelta(hours=2), now + timedelta(hours=2)
    combos = itertools.product(("", "BLOCKED_ON_HUMAN", "HOST_SILENT"), (None, past, future),
                               ("running", "blocked", "done", "failed"))
    Goal.objects.bulk_create([
        Goal(id=uuid.uuid4(), workspace=f"/w/{i}", goal_key=f"g{i}", agent="a", status=status,
             attention=attention, deadline_at=deadline, created_at=now, updated_at=now,
             version=1, last_hash="", state={})
        for i, (attention, deadline, status) in enumerate(combos)])
    listed: dict[str, int] = {}
    for goal in alerts.needing_a_human(Goal.objects.all(), now):
        listed[alerts.matched_reason(goal)] = listed.get(alerts.matched_reason(goal), 0) + 1
    assert alerts.counts_by_reason(Goal.objects.all(), now) == listed
    assert listed[liveness.OVERDUE_REASON] == 2  # attention "", deadline past, active
    assert sum(listed.values()) == alerts.count(Goal.objects.all(), now)


def test_a_goal_ending_or_recovered_moves_its_tally_and_nothing_else_does():
    from ledger.domain import GoalState
    from ledger.eventstore.store import Outcome

    running = GoalState(goal_id="g", status="running")
    waiting = GoalState(goal_id="g", status="waiting")
    failed = GoalState(goal_id="g", status="failed", reason="AUTH_FAILED")
    shard = tallies.shard_of("g")  # every move of the goal lands in its shard's rows
    ended = (tallies.ENDED, tallies.labels(reason="AUTH_FAILED", shard=shard, status="failed"))
    active = (tallies.ACTIVE, tallies.labels(reason="", shard=shard, status="running"))
    assert tallies.deltas(Outcome(failed, before=running)) == {ended: 1, active: -1}
    assert tallies.deltas(Outcome(running, before=failed)) == {ended: -1, active: 1}
    # A start: no goal before it (status ""), one active goal after.
    assert tallies.deltas(Outcome(running, before=GoalState(), created=True)) == {active: 1}
    assert tallies.deltas(Outcome(waiting, before=running)) == {
        active: -1, tallies.goal_key("waiting", "", shard): 1}
    # A heartbeat or a checkpoint keeps (status, reason): no tally moves.
    assert tallies.deltas(Outcome(running, before=running)) == {}


@pytest.mark.django_db
def test_the_migrations_count_the_goals_that_were_there(auditor, clock):
    """Goals that ended before the tallies existed are counted once, by 0010;
    every goal (active ones too) by status and reason, once, by 0017: goal
    rows written past the store (as here) are in no tally until then."""
    import importlib
    import uuid
    from types import SimpleNamespace

    from django.apps import apps
    from django.db import connection

    from ledger.models import Goal

    now = clock()
    Goal.objects.bulk_create([
        Goal(id=uuid.uuid4(), workspace=f"/w/{i}", goal_key=f"g{i}", agent="a", status=status,
             reason=reason, created_at=now, updated_at=now, version=1, last_hash="", state={})
        for i, (status, reason) in enumerate([("done", ""), ("done", ""),
                                              ("failed", "AUTH_FAILED"), ("running", ""),
                                              ("blocked", "BLOCKED_ON_HUMAN")])])
    editor = SimpleNamespace(connection=connection)
    ended = importlib.import_module("ledger.migrations.0010_metric_tallies")
    ended.count_ended_goals(apps, editor)
    found = scrape(bearer(auditor.token))
    assert found["wakeledger_goals", (("reason", ""), ("status", "done"))] == 2
    assert found["wakeledger_goals", (("reason", "AUTH_FAILED"), ("status", "failed"))] == 1
    assert ("wakeledger_goals", (("reason", ""), ("status", "running"))) not in found
    everything = importlib.import_module("ledger.migrations.0017_active_goal_tallies")
    for _ in range(2):  # the ended ones are set again, not counted twice
        everything.count_goals(apps, editor)
        found = {key: n for key, n in scrape(bearer(auditor.token)).items()
                 if key[0] == "wakeledger_goals"}
        assert found == {
            ("wakeledger_goals", (("reason", ""), ("status", "done"))): 2,
            ("wakeledger_goals", (("reason", "AUTH_FAILED"), ("status", "failed"))): 1,
            ("wakeledger_goals", (("reason", ""), ("status", "running"))): 1,
            ("wakeledger_goals", (("reason", "BLOCKED_ON_HUMAN"), ("status", "blocked"))): 1}
    assert not tallies.drift()
    assert ended.ENDED == everything.ENDED == tallies.ENDED
    assert everything.ACTIVE == tallies.ACTIVE
    assert set(everything.TERMINAL) == set(TERMINAL_STATUSES)


@pytest.mark.django_db
def test_notifications_are_counted_per_channel_and_result():
    """``wakeledger_notifications_total`` counts delivered and failed notices
    per channel name, never pending ones, and never a channel's URL."""
    from ledger.notify.models import Notification

    now = timezone.now()
    for key, channel, status in (("a", "env:1", "sent"), ("b", "env:1", "sent"),
                                 ("c", "admin:2", "failed"), ("d", "env:1", "pending")):
        Notification.objects.create(key=key, kind="needs_human", channel=channel,
                                    channel_redacted="json://****@h/…", title="t",
                                    body="b", status=status, created_at=now,
                                    next_attempt_at=now)
    samples = {(s.labels["channel"], s.labels["result"]): s.value
               for metric in LedgerCollector().collect()
               if metric.name == "wakeledger_notifications"
               for s in metric.samples if s.name.endswith("_total")}
    assert samples == {("env:1", "sent"): 2.0, ("admin:2", "failed"): 1.0}


@pytest.mark.django_db
def test_every_series_stays_and_a_zero_reads_as_zero(started, auditor, operator, clock):
    """Nothing needs a human: wakeledger_alerts reads 0 for every reason
    rather than vanishing (an alert rule on a vanished series sees "no data",
    not "none"); a (status, reason) no goal has any more reads 0 too."""
    from ledger.domain import liveness

    empty = scrape(bearer(auditor.token))
    assert {labels[0][1] for (name, labels) in empty if name == "wakeledger_alerts"} \
        == set(liveness.WHY)
    assert all(n == 0 for (name, _), n in empty.items() if name == "wakeledger_alerts")
    assert empty["wakeledger_continuations_charged_total", ()] == 0

    first, _ = started()
    operator.post(f"goals/{first}/stop", {"reason": "wrong repository"})
    after = scrape(bearer(auditor.token))
    assert after["wakeledger_goals", (("reason", ""), ("status", "running"))] == 0
    assert all(n == 0 for (name, _), n in after.items() if name == "wakeledger_alerts")

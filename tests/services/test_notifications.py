"""Notifications (docs/notifications.md): the flip rule as a
property, one notice per change recorded with the event that caused it,
routing, reminders, the digest, the scheduler's own alarm, delivery through
Apprise to a real webhook receiver and a real SMTP server, retries and the
crash states, redaction, and what the admin shows. The real-scheduler run
(kill -9 of the qcluster) is tests/test_notifications_e2e.py."""

import json
from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from hypothesis import given
from hypothesis import strategies as st

from ledger.domain import notices
from ledger.models import Channel, Goal, Notification, SchedulerBeat
from ledger.notify import channels, sending
from ledger.services import alerts, notifications
from tests.helpers import staff
from tests.receivers import receiving, smtp_receiving

pytestmark = pytest.mark.django_db

REASONS = st.sampled_from(["", "", "BLOCKED_APPROVAL", "HOST_SILENT", "JOB_SILENT",
                           "AGENT_BLOCKED"])


# ------------------------------------------------------------------ the domain's rule


@given(st.lists(REASONS, max_size=40))
def test_notices_are_exactly_the_changes_of_standing(attentions):
    found = list(notices.flips(attentions))
    standing = [bool(a) for a in attentions]
    changes = [i for i, now in enumerate(standing) if now != (standing[i - 1] if i else False)]
    assert [i for i, _ in found] == changes
    # They alternate, starting with "needs a human": never two of a kind in a row.
    assert [kind for _, kind in found] == [
        (notices.STARTED, notices.STOPPED)[n % 2] for n in range(len(found))]


@given(st.integers(0, 100), st.integers(0, 100), st.integers(0, 100), st.integers(0, 50))
def test_a_reminder_is_due_every_period_after_the_last_notice(since, told, now, every):
    from datetime import UTC, datetime

    base = datetime(2026, 1, 1, tzinfo=UTC)
    hours = [base + timedelta(hours=h) for h in (since, told, now)]
    due = notices.reminder_due(*hours, timedelta(hours=every))
    assert due == (every > 0 and now - since >= every and now - told >= every)


@given(st.integers(0, 23), st.lists(st.integers(0, 24 * 10), min_size=1, max_size=60))
def test_the_digest_is_due_once_a_day_at_its_hour(hour, offsets):
    """Whenever the sweeper happens to look, a day gets at most one digest,
    and every day looked at after its hour gets one."""
    from datetime import UTC, datetime

    base = datetime(2026, 1, 1, tzinfo=UTC)
    last, sent = None, []
    for moment in sorted(base + timedelta(hours=h) for h in offsets):
        if notices.digest_due(hour, last, moment):
            last = moment
            sent.append(moment)
    assert len({m.date() for m in sent}) == len(sent)
    assert all(m.hour >= hour for m in sent)
    looked = {m.date() for m in (base + timedelta(hours=h) for h in offsets) if m.hour >= hour}
    assert {m.date() for m in sent} == looked
    assert not notices.digest_due(None, None, base)


# ------------------------------------------------------------------ recording


@pytest.fixture
def hook(settings):
    """A webhook receiver, configured as the one channel of WAKELEDGER_NOTIFY."""
    with receiving() as (url, received):
        settings.WAKELEDGER_NOTIFY = url.replace("http://", "json://")
        settings.SITE_URL = "https://ledger.example.com"
        yield received


def gate(agent, gid, lease):
    return agent.post(f"goals/{gid}/approvals", {"lease": lease, "gate": "deploy",
                                                 "summary": "ship v2 wlp_sk-secret"})


def approve(operator, gid):
    return operator.post(f"goals/{gid}/approvals/deploy/resolve", {"decision": "approve"})


def test_a_goal_that_blocks_and_is_resolved_records_one_notice_each(
        agent, operator, started, clock, hook):
    gid, lease = started()
    agent.post(f"goals/{gid}/checkpoints", {"lease": lease, "summary": "half way",
                                           "progress_pct": 50})
    assert Notification.objects.count() == 0  # no change of standing, no notice
    assert gate(agent, gid, lease).json()["reason"] == "BLOCKED_APPROVAL"
    [started_row] = Notification.objects.all()
    assert (started_row.kind, started_row.reason, str(started_row.goal_id)) == (
        notices.STARTED, "BLOCKED_APPROVAL", gid)
    # The same standing again (an operator's wake refused, a sweep): nothing new.
    clock.advance(minutes=5)
    from scheduling import tasks

    tasks.sweep_leases()
    assert Notification.objects.filter(goal_id=gid).count() == 1
    approve(operator, gid)
    kinds = list(Notification.objects.filter(goal_id=gid).order_by("pk")
                 .values_list("kind", flat=True))
    assert kinds == [notices.STARTED, notices.STOPPED]
    # What it says: the goal, its reason and a link; never the agent's text.
    assert f"https://ledger.example.com/admin/ledger/goal/{gid}/timeline/" in started_row.body
    assert "BLOCKED_APPROVAL" in started_row.body and started_row.key in started_row.body
    assert "ship v2" not in started_row.body and "wlp_" not in started_row.body
    state = notifications.states([gid])[gid]
    assert state["needs_human"] is False and state["kind"] == notices.STOPPED


@pytest.mark.django_db(transaction=True)
def test_a_command_rolled_back_records_no_notice(agent, started, hook, monkeypatch):
    """The notice is written in the command's transaction: a command that
    fails after it (here a later step of its follow-up raising) leaves neither.
    (Committed transactions: a command joins its caller's transaction whole,
    so the failed request must not run inside the test's own.)"""
    from ledger.services import caller

    real = caller.follow_up

    def crash(outcome):
        real(outcome)
        raise RuntimeError("a later step failed")

    gid, lease = started()
    monkeypatch.setattr(caller, "follow_up", crash)
    with pytest.raises(RuntimeError):
        gate(agent, gid, lease)
    assert Notification.objects.count() == 0 and Goal.objects.get(pk=gid).attention == ""
    monkeypatch.setattr(caller, "follow_up", real)
    gate(agent, gid, lease)
    assert Notification.objects.count() == 1


def test_a_goal_needing_a_human_without_a_notice_is_reminded(agent, started, hook, settings,
                                                         clock):
    from ledger.models import GoalNotice

    settings.WAKELEDGER_NOTIFY_REMIND_HOURS = 2
    gid, lease = started()
    gate(agent, gid, lease)
    GoalNotice.objects.all().delete()  # as if `replay --fix` had set its attention
    Notification.objects.all().delete()
    assert notifications.remind() == 0
    clock.advance(hours=2)
    assert notifications.remind() == 1
    assert Notification.objects.get().kind == notices.REMINDER


def test_notices_are_routed_by_agent_workspace_and_reason(agent, started, settings):
    with receiving() as (url, _):
        base = url.replace("http://", "json://")
        settings.WAKELEDGER_NOTIFY = json.dumps([
            {"url": base + "?a=1", "agents": ["agent-1"]},
            {"url": base + "?a=2", "agents": ["someone-else"]},
            {"url": base + "?a=3", "workspaces": ["/srv/repos"]},
            {"url": base + "?a=4", "workspaces": ["/srv/rep"]},
            {"url": base + "?a=5", "reasons": ["HOST_SILENT"]},
            {"url": base + "?a=6", "reasons": ["BLOCKED_APPROVAL"]}])
        gid, lease = started()
        gate(agent, gid, lease)
    taken = {route.ref for route, _ in channels.env_channels()}
    rows = set(Notification.objects.values_list("channel", flat=True))
    expected = {channels.env_ref(base + f"?a={n}") for n in (1, 3, 6)}
    assert rows == expected and expected <= taken


def test_a_bad_notify_setting_stops_start_up_without_showing_the_url(settings):
    for value, words in (("notaservice://user:hunter2@host", "entry 1"),
                         ('[{"url": "json://h", "agents": "x"}]', "must be a list"),
                         ("[1", "not valid JSON")):
        settings.WAKELEDGER_NOTIFY = value
        with pytest.raises(ImproperlyConfigured) as refused:
            channels.env_channels()
        assert words in str(refused.value) and "hunter2" not in str(refused.value)


def test_redaction_keeps_no_password_path_or_query():
    for url, shown in (("json://user:hunter2@hooks.example.com:8443/s3cr3t/path?token=t0k",
                        "json://****@hooks.example.com:8443/…"),
                       ("ntfy://ntfy.example.com/private-topic", "ntfy://ntfy.example.com/…")):
        assert channels.redact(url) == shown
    slack = channels.redact("slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ")
    assert "TIiajkdnlazkcOXrIdevi7FQ" not in slack and "A1BRTD4JD" not in slack


# ------------------------------------------------------------------ delivery


def test_a_notice_is_delivered_to_a_real_webhook_once(agent, started, hook):
    gid, lease = started()
    gate(agent, gid, lease)
    assert notifications.send_due() == 1
    assert notifications.send_due() == 0  # sent is done
    [(_, body)] = hook
    sent = json.loads(body)
    assert "needs a human" in sent["title"] and gid in sent["message"]
    row = Notification.objects.get()
    assert (row.status, row.attempts, row.last_error) == ("sent", 1, "")
    assert notifications.counts_by_outcome() == {"sent": 1, "failed": 0, "pending": 0}


def test_a_notice_is_delivered_by_email_through_a_real_smtp_server(agent, started, settings):
    with smtp_receiving() as (port, messages):
        settings.WAKELEDGER_NOTIFY = (f"mailto://127.0.0.1:{port}?from=ledger@example.com"
                                      "&to=ops@example.com&mode=insecure")
        gid, lease = started()
        gate(agent, gid, lease)
        assert notifications.send_due() == 1
    [message] = messages
    assert "needs a human" in message["Subject"] and message["To"] == "ops@example.com"
    text = "".join(part.get_payload(decode=True).decode() for part in message.walk()
                   if not part.is_multipart())
    assert gid in text and "ship v2" not in text


def test_a_refused_notice_is_retried_with_backoff_then_failed(agent, started, settings,
                                                              clock):
    settings.WAKELEDGER_NOTIFY_MAX_ATTEMPTS = 3
    with receiving(status=500) as (url, received):
        settings.WAKELEDGER_NOTIFY = url.replace("http://", "json://")
        gid, lease = started()
        gate(agent, gid, lease)
        assert notifications.send_due() == 0
        row = Notification.objects.get()
        assert (row.status, row.attempts, row.last_error) == ("pending", 1, "not_delivered")
        assert notifications.send_due() == 0 and len(received) == 1  # not yet due again
        clock.advance(minutes=1)
        notifications.send_due()
        clock.advance(minutes=2)
        notifications.send_due()
        row.refresh_from_db()
    assert (row.status, row.attempts, len(received)) == ("failed", 3, 3)
    assert notifications.counts_by_outcome() == {"sent": 0, "failed": 1, "pending": 0}


def test_a_sender_killed_mid_send_is_sent_again_once(agent, started, hook, settings, clock):
    """The crash state: a row left "sending" (the sender died after marking
    it) goes back to pending after its timeout and grace, and is sent once."""
    gid, lease = started()
    gate(agent, gid, lease)
    row = Notification.objects.get()
    Notification.objects.filter(pk=row.pk).update(status="sending", sending_at=clock(),
                                                  attempts=1)
    assert notifications.send_due() == 0 and hook == []  # another sender may still be on it
    clock.advance(seconds=settings.WAKELEDGER_NOTIFY_TIMEOUT_SECONDS
                  + settings.WAKELEDGER_OUTBOX_GRACE_SECONDS + 1)
    assert notifications.send_due() == 1
    assert notifications.send_due() == 0
    row.refresh_from_db()
    assert (row.status, row.attempts, len(hook)) == ("sent", 2, 1)


def test_a_channel_removed_before_sending_fails_the_row_by_type(agent, started, hook,
                                                                settings):
    gid, lease = started()
    gate(agent, gid, lease)
    settings.WAKELEDGER_NOTIFY = ""
    notifications.send_due()
    row = Notification.objects.get()
    assert (row.status, row.last_error) == ("failed", sending.CHANNEL_GONE)


# ------------------------------------------------------------------ on a clock


def test_a_goal_left_unattended_is_reminded_once_per_period(agent, started, hook, settings,
                                                            clock):
    settings.WAKELEDGER_NOTIFY_REMIND_HOURS = 4
    gid, lease = started()
    gate(agent, gid, lease)
    clock.advance(hours=3)
    assert notifications.remind() == 0
    clock.advance(hours=1)
    assert notifications.remind() == 1
    assert notifications.remind() == 0  # the same period: once
    clock.advance(hours=4)
    assert notifications.remind() == 1
    kinds = list(Notification.objects.order_by("pk").values_list("kind", flat=True))
    assert kinds == [notices.STARTED, notices.REMINDER, notices.REMINDER]


def test_the_daily_digest_lists_the_goals_once_a_day(agent, started, hook, settings, clock):
    settings.WAKELEDGER_NOTIFY_DIGEST_HOUR = 10  # the clock starts at 09:00 UTC
    gid, lease = started()
    gate(agent, gid, lease)
    assert notifications.digest() == 0
    clock.advance(hours=1)
    assert notifications.digest() == 1
    assert notifications.digest() == 0
    digest = Notification.objects.get(kind=notices.DIGEST)
    assert digest.goal_id is None and gid in digest.body and "1 goal(s)" in digest.title
    clock.advance(days=1)
    assert notifications.digest() == 1


def test_the_scheduler_silent_alarm_flips_once_each_way(hook, clock, settings):
    alerts.beat()
    assert notifications.scheduler_standing() == "ok"
    clock.advance(minutes=3 * settings.WAKELEDGER_SWEEP_MINUTES + 1)
    for _ in range(3):  # `ledger notify` from cron, every few minutes
        assert notifications.scheduler_standing() == "silent"
        clock.advance(minutes=2)
    alerts.beat()
    notifications.tick()  # the first sweep back tells so
    assert notifications.scheduler_standing() == "ok"
    # Cron did not send the silence here, so the first sweep back sends both.
    assert [json.loads(body)["title"] for _, body in hook] == [
        "Wake Ledger: the scheduler is silent", "Wake Ledger: the scheduler runs again"]
    kinds = list(Notification.objects.order_by("pk").values_list("kind", flat=True))
    assert kinds == [notices.SCHEDULER_SILENT, notices.SCHEDULER_BACK]
    assert not SchedulerBeat.objects.filter(name=notifications.SILENT_BEAT).exists()


def test_ledger_notify_sends_and_lists_channels_redacted(agent, started, hook):
    from tests.helpers import ledger_text

    gid, lease = started()
    gate(agent, gid, lease)
    assert "1 notification(s) sent now" in ledger_text("notify")
    listed = ledger_text("notify", "--channels")
    assert "json://127.0.0.1:" in listed and "/hook" not in listed and "1 channel(s)" in listed
    assert len(hook) == 1


# ------------------------------------------------------------------ the admin


def test_an_admin_channel_is_encrypted_at_rest_and_never_shown(agent, started, settings):
    admin = staff("root", superuser=True)
    with receiving() as (url, received):
        secret_url = url.replace("http://", "json://user:hunter2@") + "/s3cr3t"
        added = admin.post("/admin/ledger/channel/add/", {
            "name": "ops", "url": secret_url, "agents": "", "workspaces": "/srv/repos",
            "reasons": "", "enabled": "on"})
        assert added.status_code == 302, added.content.decode()[:2000]
        channel = Channel.objects.get()
        assert "hunter2" not in channel.url_encrypted and "s3cr3t" not in channel.url_encrypted
        assert "hunter2" not in channel.url_redacted
        page = admin.get(f"/admin/ledger/channel/{channel.pk}/change/").content.decode()
        assert "hunter2" not in page and "s3cr3t" not in page and channel.url_redacted in page
        # Saved without a URL keeps the stored one.
        admin.post(f"/admin/ledger/channel/{channel.pk}/change/", {
            "name": "ops", "url": "", "agents": "", "workspaces": "/srv/repos", "reasons": "",
            "enabled": "on"})
        gid, lease = started()
        gate(agent, gid, lease)
        assert notifications.send_due() == 1
    assert len(received) == 1 and received[0][0]["Authorization"].startswith("Basic ")
    listing = admin.get("/admin/ledger/notification/").content.decode()
    assert channel.url_redacted in listing and "hunter2" not in listing
    # A bad URL is refused without being echoed back.
    refused = admin.post("/admin/ledger/channel/add/", {"name": "bad",
                                                        "url": "nope://hunter2@x"})
    assert refused.status_code == 200 and "hunter2" not in refused.content.decode()


def test_auditors_see_notifications_read_only_and_operators_cannot_add_channels(
        agent, started, hook):
    gid, lease = started()
    gate(agent, gid, lease)
    notifications.send_due()
    auditor = staff("aud", "auditor")
    row = Notification.objects.get()
    assert auditor.get("/admin/ledger/notification/").status_code == 200
    detail = auditor.get(f"/admin/ledger/notification/{row.pk}/change/")
    assert detail.status_code == 200 and b"Save" not in detail.content
    assert auditor.post(f"/admin/ledger/notification/{row.pk}/delete/").status_code == 403
    assert staff("op", "operator").get("/admin/ledger/channel/add/").status_code == 403
    timeline = auditor.get(f"/admin/ledger/goal/{gid}/timeline/").content.decode()
    assert "needs_human →" in timeline and "sent" in timeline
    dashboard = auditor.get("/admin/ledger/goal/dashboard/").content.decode()
    assert 'data-testid="notified">needs_human: sent' in dashboard
    assert Goal.objects.get(pk=gid).attention == "BLOCKED_APPROVAL"


def test_no_url_secret_reaches_a_log(agent, started, settings, caplog):
    import logging

    caplog.set_level(logging.DEBUG)
    with receiving(status=500) as (url, received):
        settings.WAKELEDGER_NOTIFY = url.replace("http://", "json://bot:hunter2@") + "/s3cr3t"
        gid, lease = started()
        gate(agent, gid, lease)
        notifications.send_due()
    assert len(received) == 1  # it was tried, and refused
    ours = [r.getMessage() for r in caplog.records if not r.name.startswith("apprise")]
    assert any("not_delivered" in line for line in ours)
    assert not [line for line in ours if "hunter2" in line or "s3cr3t" in line]
    # Apprise's own records (which quote URLs and answers) stop at its logger.
    assert logging.getLogger("apprise").propagate is False


def test_counts_by_outcome_is_one_aggregate_query(agent, clock, hook,
                                                  django_assert_num_queries):
    from tests.factories import lease_of

    for n in range(3):
        body = agent.start(goal_key=f"goal-{n}", workspace=f"/srv/repos/w{n}",
                           policy={"lease_seconds": 300}).json()
        gate(agent, body["goal"]["id"], lease_of(body))
    first, second, _ = Notification.objects.order_by("pk")
    Notification.objects.filter(pk=first.pk).update(status="sent")
    Notification.objects.filter(pk=second.pk).update(status="sending")
    with django_assert_num_queries(1):
        counts = notifications.counts_by_outcome()
    assert counts == {"sent": 1, "failed": 0, "pending": 2}


def test_an_idle_sweep_costs_the_notifications_two_queries(clock, settings,
                                                           django_assert_max_num_queries):
    """Nothing told, nothing pending, no digest: the sweeper's pass asks
    whether a silence was told and whether a row is unfinished (reminders are
    looked for every ten minutes)."""
    notifications.tick()  # the first pass looks for reminders
    clock.advance(minutes=1)
    with django_assert_max_num_queries(2):
        assert notifications.tick() == 0


def test_a_last_sweep_dated_in_the_future_is_a_silence_told_and_its_rows_restored(
        hook, clock, settings):
    """The clock ran two hours ahead for a few minutes and was set back: the
    sweeper's last beat and django-q2's rows (moved on by the wall clock) lie
    two hours ahead. That reads silent, not ok; the pass from outside the
    scheduler (cron's `ledger notify`) tells it and makes both rows due, and
    the first sweep back is told."""
    from django.utils import timezone
    from django_q.models import Schedule

    from ledger.operators import doctor

    real = clock()
    clock.current = real + timedelta(hours=2)
    alerts.beat()
    clock.current = real + timedelta(minutes=2, seconds=30)
    ahead = timezone.now() + timedelta(hours=2)
    doctor.ensure_sweeper(force=True)
    doctor.ensure_repair(force=True)
    Schedule.objects.filter(name__in=(doctor.SWEEPER_NAME, doctor.REPAIR_NAME)) \
        .update(next_run=ahead)
    health = alerts.scheduler_health()
    assert health["status"] == "silent" and "ahead of this clock" in health["why"]
    assert notifications.scheduler_standing() == "silent"
    for name in (doctor.SWEEPER_NAME, doctor.REPAIR_NAME):
        assert Schedule.objects.get(name=name).next_run <= timezone.now()
    alerts.beat()  # the sweep the restored row fires
    notifications.tick()
    assert notifications.scheduler_standing() == "ok"
    assert [json.loads(body)["title"] for _, body in hook] == [
        "Wake Ledger: the scheduler is silent", "Wake Ledger: the scheduler runs again"]


def test_the_watch_reads_an_unchanged_last_sweep_by_its_own_monotonic_clock(hook, clock,
                                                                            settings):
    """The clock was set back four minutes (within the skew bound, so the
    beat before it reads as recent) and the scheduler died: by the wall clock
    the last sweep stays "recent" for minutes more. The watch (`ledger notify
    --every`) has seen the same last sweep for longer than the limit by its
    monotonic clock, which no clock step moves: silent, told."""
    real = clock()
    clock.current = real + timedelta(minutes=4)
    alerts.beat()
    clock.current = real
    ticks = [100.0]
    beats = notifications.BeatWatch(monotonic=lambda: ticks[0])
    assert notifications.scheduler_standing(beats=beats) == "ok"
    silence = settings.WAKELEDGER_SCHEDULER_SILENT_SECONDS + 1
    ticks[0] += silence
    clock.advance(seconds=silence)
    assert alerts.scheduler_health()["status"] == "ok"  # the wall clock alone is fooled
    assert notifications.scheduler_standing(beats=beats) == "silent"
    assert Notification.objects.filter(kind=notices.SCHEDULER_SILENT).count() == 1
    alerts.beat()  # the scheduler is back: a new last sweep
    assert notifications.scheduler_standing(beats=beats) == "ok"
    assert Notification.objects.filter(kind=notices.SCHEDULER_BACK).count() == 1

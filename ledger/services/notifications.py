"""Telling a human: the use cases behind notifications.

- ``enqueue``: one outbox row per channel that takes a notice; a command's
  flip of its goal's standing is recorded with it
  (``followup.record_flip``, a step of ``caller.follow_up``).
- ``remind``, ``digest``, ``scheduler_standing``: what the sweeper (and
  ``ledger notify``) record on a clock; each keyed so a second caller records
  nothing twice.
- ``send_due``: deliver what is due (``ledger.notify.sending``).
- ``run_pass``: one ``ledger notify``; ``watch``: one every N seconds until
  stopped (``ledger notify --every``, the Procfile's ``watch``).
- ``counts_by_outcome``: sent, failed and pending, one SQL aggregate (for
  metrics); ``states``: each goal's last notice, for the admin.
"""

import logging
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from django import db
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Exists, Max, OuterRef
from django.urls import reverse

from ledger.domain import GoalState, liveness, notices
from ledger.domain.events import iso
from ledger.eventstore import clock
from ledger.models import Goal, SchedulerBeat
from ledger.notify import channels, sending
from ledger.notify.models import Channel, GoalNotice, Notification
from ledger.project.siteurl import base_url
from ledger.services import alerts, schedules

DIGEST_BEAT = "notify.digest"  # SchedulerBeat row: when the last digest was recorded
SILENT_BEAT = "notify.silent_since"  # the last beat of the silence last told

logger = logging.getLogger(__name__)


def goal_link(goal_id: str) -> str:
    return base_url() + reverse("admin:ledger_goal_timeline", args=[goal_id])


def subject_of(state: GoalState, reason: str, since: datetime) -> notices.Subject:
    return notices.Subject(goal_id=state.goal_id, goal_key=state.goal_key, agent=state.agent,
                           workspace=state.workspace, reason=reason, since=iso(since))


def enqueue(key: str, kind: str, title: str, body_of: Any, *, goal_id: str | None = None,
             reason: str = "", agent: str = "", workspace: str = "", goal: bool = True,
             now: datetime) -> int:
    """One row per channel that takes the notice; a key already recorded is
    skipped (a second recorder, or a retried pass). Returns rows written."""
    written = 0
    for route in channels.routes():
        if not route.takes(agent=agent, workspace=workspace, reason=reason, goal=goal):
            continue
        row_key = f"{key}:{route.ref}"
        if Notification.objects.filter(key=row_key).exists():
            continue
        try:
            with transaction.atomic():  # a savepoint: a racing recorder's row wins
                Notification.objects.create(
                    key=row_key, kind=kind, goal_id=goal_id, reason=reason, channel=route.ref,
                    channel_redacted=route.redacted, title=title[:300], body=body_of(row_key),
                    created_at=now, next_attempt_at=now)
        except IntegrityError:
            continue
        written += 1
    return written


def remind(now: datetime | None = None) -> int:
    """A reminder for each goal still needing a human WAKELEDGER_NOTIFY_REMIND_HOURS
    after it was last told (0: off). Returns how many goals were reminded."""
    now = now or clock.now()
    every = timedelta(hours=settings.WAKELEDGER_NOTIFY_REMIND_HOURS)
    if every <= timedelta(0):
        return 0
    _track_untold(now)
    due = GoalNotice.objects.filter(needs_human=True, last_notified_at__lte=now - every)
    reminded = 0
    for notice in due.iterator(chunk_size=200):
        if not notices.reminder_due(notice.since, notice.last_notified_at, now, every):
            continue
        goal = Goal.objects.filter(pk=notice.goal_id).values_list("state", "attention").first()
        if goal is None or not goal[1]:
            continue  # resolved meanwhile: its flip says so
        state = GoalState.from_dict(goal[0])
        subject = subject_of(state, goal[1], notice.since)
        link, gid = goal_link(state.goal_id), state.goal_id
        with transaction.atomic():
            # Keyed by the instant it became due: one reminder per period.
            enqueue(f"{notices.REMINDER}:{gid}:{iso(notice.last_notified_at)}",
                     notices.REMINDER, notices.title(notices.REMINDER, subject),
                     lambda key, s=subject, lk=link, r=goal[1]: notices.body(
                         notices.REMINDER, s, liveness.why(r), lk, key),
                     goal_id=gid, reason=goal[1], agent=state.agent,
                     workspace=state.workspace, now=now)
            GoalNotice.objects.filter(pk=notice.goal_id).update(last_notified_at=now)
        reminded += 1
    return reminded


def _track_untold(now: datetime, batch: int = 500) -> None:
    """Goals that need a human with no notification state (no command's flip
    put them there: ``ledger replay --fix`` rewrote their projection) get
    one, so reminders cover them too: counted from their last change, at most
    ``batch`` a pass."""
    untold = Goal.objects.filter(alerts.ATTENTION_SET) \
        .filter(~Exists(GoalNotice.objects.filter(goal_id=OuterRef("pk")))) \
        .values_list("pk", "attention", "updated_at")[:batch]
    GoalNotice.objects.bulk_create(
        [GoalNotice(goal_id=pk, needs_human=True, reason=reason, since=since or now,
                    last_notified_at=since or now) for pk, reason, since in untold],
        ignore_conflicts=True)


def digest(now: datetime | None = None) -> int:
    """Once a UTC day at WAKELEDGER_NOTIFY_DIGEST_HOUR (unset: off): the list
    of goals needing a human, oldest first (the /alerts query; at most 50 named)."""
    now = now or clock.now()
    if settings.WAKELEDGER_NOTIFY_DIGEST_HOUR is None:
        return 0
    last = SchedulerBeat.objects.filter(name=DIGEST_BEAT).values_list("at", flat=True).first()
    if not notices.digest_due(settings.WAKELEDGER_NOTIFY_DIGEST_HOUR, last, now):
        return 0
    listed = alerts.needing_a_human(Goal.objects.all(), now)
    total = listed.count()
    lines = [f"{total} goal(s) need a human."]
    for goal in listed[:50]:
        row = alerts.row(goal, now)
        lines.append(f"- {row['id']} {row['goal_key'] or '-'} ({row['agent']}): "
                     f"{row['reason']} since {row['since']}  {goal_link(row['id'])}")
    if total > 50:
        lines.append(f"… and {total - 50} more: {base_url()}{reverse('admin:index')}")
    title = notices.title(notices.DIGEST, count=total)
    with transaction.atomic():
        written = enqueue(f"{notices.DIGEST}:{now.date().isoformat()}", notices.DIGEST, title,
                           lambda key: "\n".join([*lines, f"notification: {key}"]),
                           reason="", goal=False, now=now)
        SchedulerBeat.objects.update_or_create(name=DIGEST_BEAT, defaults={"at": now})
    return written


class BeatWatch:
    """A long-running process's own evidence of the sweeper's silence: how
    long it has seen the same last sweep, by ``time.monotonic``, which no step
    of the wall clock moves (``alerts.scheduler_health``'s ``unchanged_for``).
    The watch keeps one for as long as it runs."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic):
        self.monotonic = monotonic
        self.seen: datetime | None = None
        self.since = 0.0

    def __call__(self, beat: datetime) -> timedelta:
        now = self.monotonic()
        if beat != self.seen:
            self.seen, self.since = beat, now
        return timedelta(seconds=now - self.since)


def scheduler_standing(now: datetime | None = None, beats: BeatWatch | None = None) -> str:
    """The scheduler's own flip: record SCHEDULER_SILENT once per silence
    (keyed by its last beat) when the sweeper stopped beating, and
    SCHEDULER_BACK once it beats again. Run by ``ledger notify`` (cron: the
    scheduler cannot report its own death) and by every sweep (which tells
    that it is back). Returns the scheduler's status."""
    now = now or clock.now()
    health = alerts.scheduler_health(now, unchanged_for=beats)
    told = SchedulerBeat.objects.filter(name=SILENT_BEAT).values_list("at", flat=True).first()
    last = health["last_sweep_at"]
    admin = base_url() + reverse("admin:index")
    if health["status"] == "silent":
        _restore_scheduler_rows()
    if health["status"] == "silent" and last:
        with transaction.atomic():
            enqueue(f"{notices.SCHEDULER_SILENT}:{last}", notices.SCHEDULER_SILENT,
                     notices.title(notices.SCHEDULER_SILENT),
                     lambda key: (f"No lease sweep has completed since {last}: is the "
                                  f"scheduler (manage.py qcluster) running?\nopen: {admin}\n"
                                  f"notification: {key}"),
                     reason=notices.SCHEDULER_REASON, goal=False, now=now)
            SchedulerBeat.objects.update_or_create(
                name=SILENT_BEAT, defaults={"at": datetime.fromisoformat(last)})
    elif health["status"] == "ok" and told is not None:
        with transaction.atomic():
            enqueue(f"{notices.SCHEDULER_BACK}:{iso(told)}", notices.SCHEDULER_BACK,
                     notices.title(notices.SCHEDULER_BACK),
                     lambda key: (f"Lease sweeps run again (silent since {iso(told)}).\n"
                                  f"open: {admin}\nnotification: {key}"),
                     reason=notices.SCHEDULER_REASON, goal=False, now=now)
            SchedulerBeat.objects.filter(name=SILENT_BEAT).delete()
    return health["status"]


def _restore_scheduler_rows() -> None:
    """The sweeper's and the hourly repair's rows, restored when they will not
    fire soon (``schedules.ensure_sweeper``: years or hours ahead, or gone). A
    clock that ran ahead and was set back leaves both as far ahead as it
    ran: the sweeper then never fires, and the repair that would restore it
    neither, so this pass — from a process other than the scheduler — is
    the one left to. A row that will fire on time is not touched."""
    try:
        schedules.ensure_sweeper(only_if_wrong=True)
        schedules.ensure_repair()
    except db.DatabaseError as error:  # told as the silence is; the next pass tries again
        logger.warning("could not restore the scheduler's rows: %s", type(error).__name__)


def send_due(now: datetime | None = None) -> int:
    """Deliver every due notification (rows a dead sender left first)."""
    sending.resolve_stuck(now)
    return sending.send_due(now)


# Reminders count hours: the sweeper looks for due ones every ten minutes,
# not every pass (two queries a minute for a rule measured in hours).
REMIND_LOOK_EVERY = timedelta(minutes=10)
_reminders_looked_at: datetime | None = None


def tick(now: datetime | None = None) -> int:
    """What the sweeper runs each pass, cheaply: it has just beaten, so the
    scheduler's standing matters only when a silence was told; reminders
    every ten minutes; the digest only when set; delivery only when a row is
    unfinished (one indexed query). Returns how many were sent."""
    global _reminders_looked_at
    now = now or clock.now()
    if SchedulerBeat.objects.filter(name=SILENT_BEAT).exists():
        scheduler_standing(now)
    looked = _reminders_looked_at
    if looked is None or not timedelta(0) <= now - looked < REMIND_LOOK_EVERY:
        remind(now)
        _reminders_looked_at = now
    if settings.WAKELEDGER_NOTIFY_DIGEST_HOUR is not None:
        digest(now)
    if not Notification.objects.filter(
            status__in=(Notification.PENDING, Notification.SENDING)).exists():
        return 0
    return send_due(now)


def run_pass(now: datetime | None = None, beats: BeatWatch | None = None) -> dict[str, Any]:
    """The clock's notices (the scheduler's standing, reminders, the digest),
    then delivery: the sweeper's pass and ``ledger notify``'s (``beats``: the
    watch's own evidence of how long the last sweep stayed the same)."""
    now = now or clock.now()
    status = scheduler_standing(now, beats)
    reminded = remind(now)
    digested = digest(now)
    return {"scheduler": status, "reminded": reminded, "digest": digested,
            "sent": send_due(now)}


def watch(every: float, stopped: threading.Event,
          report: Callable[[dict[str, Any]], None] = lambda done: None) -> int:
    """``ledger notify --every``: one ``run_pass`` every ``every`` seconds
    until ``stopped`` is set (the command's SIGTERM/SIGINT handler), then
    return how many rounds ran. The scheduler-silent alarm must come from a
    process other than the scheduler; this is that process under ``make run``
    (the Procfile's ``watch``) or systemd. A failed round (the database away,
    say) is logged by its type only — an exception's text may quote a URL or
    a query — and the next round tries again on a fresh connection. Sending
    alongside the qcluster's tick is safe: each row is claimed (pending →
    sending, committed) by one conditional UPDATE before any network call."""
    rounds, beats = 0, BeatWatch()
    while not stopped.is_set():
        try:
            report(run_pass(beats=beats))
        except Exception as error:  # one round's failure must not end the watch
            logger.warning("notification round failed (%s); next in %ss",
                           type(error).__name__, every)
        finally:
            # A broken connection is dropped here, so the next round reconnects
            # (never inside a caller's transaction: a test's, which it would end).
            if not db.connection.in_atomic_block:
                db.close_old_connections()
        rounds += 1
        stopped.wait(every)
    return rounds


def url_is_valid(url: str) -> bool:
    """Whether Apprise can load an operator's URL (the admin's form)."""
    return channels.valid(url)


def protect_url(channel: Channel, url: str) -> None:
    """Set an admin channel's URL: kept encrypted, shown only redacted."""
    channel.url_encrypted = channels.encrypt(url)
    channel.url_redacted = channels.redact(url)


def of_goal(goal_id: Any, limit: int = 10) -> list[Notification]:
    """A goal's newest notifications (its timeline page)."""
    return list(Notification.objects.filter(goal_id=goal_id).order_by("-created_at", "-pk")
                [:limit])


def channel_list() -> list[dict[str, str]]:
    """The channels, redacted, with their routing (``ledger notify --channels``)."""
    return [{"ref": route.ref, "redacted": route.redacted,
             "routing": "; ".join(f"{name}: {', '.join(values)}" for name, values in (
                 ("agents", route.agents), ("workspaces", route.workspaces),
                 ("reasons", route.reasons)) if values)} for route in channels.routes()]


def counts_by_outcome() -> dict[str, int]:
    """Notifications by outcome — sent, failed, pending (pending and sending
    rows, still to be delivered) — in one SQL aggregate over the outbox: what
    the metrics expose as ``wakeledger_notifications_*``."""
    # GROUP BY the status: the (status, next_attempt_at) index's leading
    # column, so PostgreSQL can count from the index alone.
    counts = {"sent": 0, "failed": 0, "pending": 0}
    for status, n in Notification.objects.order_by().values_list("status") \
            .annotate(n=Count("pk")).values_list("status", "n"):
        counts["pending" if status in (Notification.PENDING, Notification.SENDING)
               else status] += n
    return counts


def delivered_by_channel() -> dict[tuple[str, str], int]:
    """Notifications sent and failed per channel, {(channel, "sent"|"failed"):
    n}: the ``wakeledger_notifications_total`` samples. The channel is its
    stored name (``env:<digest>`` or ``admin:<pk>``), never its URL."""
    rows = Notification.objects.order_by() \
        .filter(status__in=(Notification.SENT, Notification.FAILED)) \
        .values_list("channel", "status").annotate(n=Count("pk"))
    return {(channel, status): n for channel, status, n in rows}


def states(goal_ids: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Each goal's notification state, for the admin: whether the last notice
    said it needs a human, when it was sent (or not), and its delivery."""
    ids = [str(g) for g in goal_ids]
    found: dict[str, dict[str, Any]] = {}
    for notice in GoalNotice.objects.filter(goal_id__in=ids):
        found[str(notice.goal_id)] = {"needs_human": notice.needs_human,
                                      "since": notice.since, "status": "", "at": None,
                                      "kind": ""}
    # The newest row of each goal: one indexed MAX per goal of the page.
    newest = Notification.objects.filter(goal_id__in=ids).values("goal_id") \
        .annotate(last=Max("pk")).values_list("last", flat=True)
    for row in Notification.objects.filter(pk__in=list(newest)) \
            .values("goal_id", "status", "created_at", "done_at", "kind"):
        entry = found.setdefault(str(row["goal_id"]), {"needs_human": None, "since": None})
        entry.update(status=row["status"], at=row["done_at"] or row["created_at"],
                     kind=row["kind"])
    return found

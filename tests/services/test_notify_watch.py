"""The notification watch (`ledger notify --every`, the Procfile's `watch`):
two senders at once — the watch and the qcluster's tick — deliver each
notification exactly once to a real webhook receiver; a failed round is
logged by its type and the loop goes on; SIGINT ends the loop cleanly. The
real processes (kill -9 of the qcluster, the watch telling the silence) are
tests/e2e/test_scheduler_silent_e2e.py."""

import json
import logging
import os
import signal
import threading
from collections import Counter

import pytest
from django.db import connection

from ledger.domain import notices
from ledger.models import Notification
from ledger.services import alerts, notifications
from tests.factories import lease_of
from tests.helpers import ledger_text, wait_for
from tests.receivers import receiving

GOALS = 6


@pytest.fixture
def hook(settings):
    """A webhook receiver that answers slowly (0.1 s a POST), so two rounds
    started together overlap on the rows they both see pending."""
    with receiving(delay=0.1) as (url, received):
        settings.WAKELEDGER_NOTIFY = url.replace("http://", "json://")
        settings.SITE_URL = "https://ledger.example.com"
        yield received


def blocked(agent, count: int) -> None:
    for n in range(count):
        body = agent.start(goal_key=f"watch-{n}", workspace=f"/srv/watch/{n}",
                           policy={"lease_seconds": 300}).json()
        gid, lease = body["goal"]["id"], lease_of(body)
        agent.post(f"goals/{gid}/approvals", {"lease": lease, "gate": "deploy"})


@pytest.mark.django_db(transaction=True)  # each thread its own connection, committed rows
def test_two_senders_at_once_deliver_each_notification_once(agent, hook, clock,
                                                            settings):
    blocked(agent, GOALS)
    alerts.beat()
    clock.advance(seconds=settings.WAKELEDGER_SCHEDULER_SILENT_SECONDS + 1)
    together = threading.Barrier(2)
    results: list[object] = []

    def sender(round_: object) -> None:
        try:
            together.wait(timeout=30)
            results.append(round_())
        except Exception as error:  # the assertion below names it
            results.append(error)
        finally:
            connection.close()  # this thread's own connection

    # The watch's round and the sweeper's tick, at the same moment.
    threads = [threading.Thread(target=sender, args=(notifications.run_pass,)),
               threading.Thread(target=sender, args=(notifications.tick,))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not [r for r in results if isinstance(r, Exception)], results
    # Both saw the silence; it is recorded once. Every row went out exactly once.
    rows = dict(Notification.objects.values_list("key", "status"))
    assert len(rows) == GOALS + 1 and set(rows.values()) == {"sent"}
    assert Notification.objects.filter(kind=notices.SCHEDULER_SILENT).count() == 1
    delivered = Counter(json.loads(body)["message"].rsplit("notification: ", 1)[1].strip()
                        for _, body in hook)
    assert delivered == Counter(dict.fromkeys(rows, 1))
    assert set(Notification.objects.values_list("attempts", flat=True)) == {1}


@pytest.mark.django_db
def test_a_failed_round_is_logged_by_type_and_the_watch_goes_on(hook, caplog):
    stopped, rounds = threading.Event(), []

    def report(done: dict) -> None:
        rounds.append(done)
        if len(rounds) == 1:
            raise ConnectionError("postgres://ledger:hunter2@db/ledger refused")
        stopped.set()

    with caplog.at_level(logging.WARNING, logger="ledger.services.notifications"):
        assert notifications.watch(0.01, stopped, report) == 2
    assert len(rounds) == 2
    [line] = [r.getMessage() for r in caplog.records]
    assert "ConnectionError" in line and "hunter2" not in line and "postgres://" not in line


def watch_until(stop_when, caplog) -> list[str]:
    """Run `ledger notify --every 1` until ``stop_when()``, then SIGINT it (as
    Ctrl-C or make run's stop would); its log lines (it is a service: its
    lines are log lines, in the deployment's format), "LEVEL message" each."""
    def interrupt() -> None:
        wait_for(stop_when, 30, what="the watch's rounds")
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with caplog.at_level(logging.INFO, logger="ledger.watch"):
        assert ledger_text("notify", "--every", "1") == ""  # nothing bare on stdout
    return [f"{r.levelname} {r.getMessage()}" for r in caplog.records
            if r.name == "ledger.watch"]


@pytest.mark.django_db
def test_ledger_notify_every_sends_then_stops_cleanly_on_sigint(agent, hook,
                                                                 clock, caplog):
    blocked(agent, 1)
    before = signal.getsignal(signal.SIGINT)
    lines = watch_until(lambda: len(hook) == 1, caplog)
    assert lines[0].startswith("INFO watching: a notification pass every 1s")
    assert "WARNING scheduler never_ran; 1 notification(s) sent" in lines
    assert lines[-1].startswith("INFO stopped after")
    assert Notification.objects.get().status == "sent"
    assert signal.getsignal(signal.SIGINT) is before  # the caller's handler again


@pytest.mark.django_db
def test_the_watch_says_nothing_of_a_scheduler_still_starting(settings, caplog, monkeypatch):
    """make run starts the watch beside the scheduler: for its first ~40 s no
    sweep has run yet. That is news only once it lasts as long as a silence."""
    settings.WAKELEDGER_NOTIFY = []
    rounds: list[int] = []
    real = notifications.run_pass

    def counted(*args, **kwargs):
        rounds.append(1)
        return real(*args, **kwargs)

    settings.WAKELEDGER_SCHEDULER_SILENT_SECONDS = 3600
    monkeypatch.setattr(notifications, "run_pass", counted)
    lines = watch_until(lambda: len(rounds) >= 2, caplog)
    assert not [line for line in lines if "never_ran" in line], lines
    # Past the silence threshold it is a warning: nothing has ever swept.
    caplog.clear()
    settings.WAKELEDGER_SCHEDULER_SILENT_SECONDS = 0
    lines = watch_until(lambda: any("never_ran" in r.getMessage() for r in caplog.records),
                        caplog)
    assert "WARNING scheduler never_ran; 0 notification(s) sent" in lines


def test_every_must_be_a_positive_number_of_seconds():
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="--every"):
        call_command("ledger", "notify", "--every", "0")


def test_the_silence_threshold_is_three_sweeps_unless_set(settings):
    assert settings.WAKELEDGER_SCHEDULER_SILENT_SECONDS == 180 * settings.WAKELEDGER_SWEEP_MINUTES

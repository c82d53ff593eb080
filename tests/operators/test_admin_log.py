"""The log's health where people look (docs/integrity.md, "What the admin
shows"): the admin's log page, a goal's timeline that checks the goal against
the log, /metrics' gauges and the notifications, in the tampered cases a DBA
with SQL alone can make (tests/log/test_log_attacks.py's helpers)."""

import re

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.db import connection
from django.test import override_settings

from ledger.domain import notices
from ledger.eventstore import triggers
from ledger.log import cosigning, sealer_state, sealing, signing
from ledger.models import Event, LogLeaf, TreeHead
from ledger.notify.models import Notification
from ledger.services import loghealth
from tests.factories import GoalFactory
from tests.helpers import ledger, staff
from tests.log.test_log_attacks import append_checkpoint, json_value, rehash_goal, sql
from tests.log.test_log_witness import served  # noqa: F401 (a fixture)
from tests.log.test_tlog_submission import witness as tlog_served  # noqa: F401 (a fixture)
from tests.operators.test_metrics import SCRAPE_TOKEN, bearer, scrape

pytestmark = pytest.mark.django_db

WITNESS = "witness.example/w1"


@pytest.fixture
def channel(settings):
    """One notification channel (nothing is sent here: rows are what is told)."""
    settings.WAKELEDGER_NOTIFY = "json://127.0.0.1:9/hook"
    settings.SITE_URL = "https://ledger.example.com"


@pytest.fixture
def witness_key(settings) -> Ed25519PrivateKey:
    key = Ed25519PrivateKey.generate()
    from wakeledger_verify import notes
    settings.WAKELEDGER_WITNESS_KEYS = [
        notes.verifier(WITNESS, key.public_key(), notes.COSIGNATURE_V1).text()]
    return key


def cosign_newest(key: Ed25519PrivateKey, at: int = 1_800_000_000) -> TreeHead:
    from wakeledger_verify import notes
    head = TreeHead.objects.order_by("-id").first()
    body = notes.split(head.checkpoint)[0]
    cosigning.add(notes.format_note(body, [notes.cosign(body, WITNESS, key, at)]))
    return head


def rewrite(event: Event, step: str = "forged by SQL") -> None:
    """A sealed checkpoint's payload rewritten, the goal's chain recomputed."""
    sql("UPDATE ledger_event SET data = %s WHERE id = %s",
        json_value({**event.data, "current_step": step}), event.id)
    rehash_goal(event.goal_id)


@pytest.fixture
def sealed(sealer_record):
    goals = [GoalFactory(goal_key="victim", checkpoints=3),
             GoalFactory(goal_key="bystander", checkpoints=2)]
    sealing.seal()
    return goals


def timeline(client, goal, **query) -> str:
    answer = client.get(f"/admin/ledger/goal/{goal.pk}/timeline/", query)
    assert answer.status_code == 200
    return answer.content.decode()


def chain_badge(page: str) -> str:
    return re.search(r'data-testid="chain">([^<]*)<', page).group(1)


# ------------------------------------------------------------------ the log page


def test_the_log_page_shows_the_head_checkpoint_witnesses_and_seal_lag(sealed, witness_key):
    cosigned = cosign_newest(witness_key)
    append_checkpoint(str(sealed[0].pk), "after the cosigned head")
    sealing.seal()
    GoalFactory(checkpoints=1)  # not sealed yet
    newest = TreeHead.objects.order_by("-id").first()
    page = staff("audrey", "auditor").get("/admin/ledger/treehead/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "log consistent: no alarm" in text
    assert f"{newest.size} leaves, signed {newest.timestamp}" in text and newest.root in text
    assert newest.checkpoint.split("\n")[0] in text  # the checkpoint note, origin first
    assert (f"{WITNESS}: cosigned {cosigned.size} leaves" in text
            and f"{newest.size - cosigned.size} leaves behind" in text)
    unsealed = Event.objects.filter(id__gt=newest.horizon).count()
    assert f"{unsealed} event(s) not under a signed head" in text


# ------------------------------------------------------------------ tampered: never "verified"


def test_after_an_sql_only_rewrite_no_admin_page_says_verified(sealed):
    victim, bystander = sealed
    triggers.drop(connection)
    event = Event.objects.filter(goal=victim, kind="checkpoint.recorded").first()
    rewrite(event)
    assert ledger("verify")[0] == 0  # the chains alone see nothing
    client = staff("audrey", "auditor")
    # Before any seal or doctor: the goal's own check against its sealed leaves.
    page = timeline(client, victim)
    assert chain_badge(page) == "chain NOT verified: its sealed events differ from the log"
    assert f"log check FAILED: event(s) seq {event.seq}" in page
    # The sealer's alarm: every goal's page says so, and the log page says what it found.
    assert ledger("seal")[0] == 3
    for goal in (victim, bystander):
        page = timeline(client, goal, verify="all")
        assert "verified (this page)" not in page and "whole chain verified" not in page
        assert 'data-testid="log-alarm"' in page and "rolling comparison" in page
    assert chain_badge(timeline(client, bystander)) == \
        "chain NOT verified: the log's alarm is raised"
    log = client.get("/admin/ledger/treehead/").content.decode()
    assert "NOT verified: the log's alarm is raised" in log
    position = LogLeaf.objects.get(event_id=event.id).position
    assert f"leaf {position}: event {event.id}" in log


def test_a_clean_goal_is_verified_against_the_signed_head(sealed):
    check = loghealth.goal_check(str(sealed[0].pk))
    assert check.status == "verified" and check.sealed == check.events == sealed[0].version
    page = timeline(staff("audrey", "auditor"), sealed[0])
    assert chain_badge(page) == "chain verified (this page)"
    assert (f"in the log (this page): {check.sealed} sealed event(s) match their leaves under "
            f"the signed head of {check.head_size} leaves") in page


def test_a_head_not_signed_by_the_servers_key_fails_the_goals_check(sealed):
    """A DBA re-signs nothing without the key: a head rewritten to a forged
    root (or signed by another key) fails under the key file's public key."""
    head = TreeHead.objects.order_by("-id").first()
    other = signing.Signer(Ed25519PrivateKey.generate(), head.key_id, "")
    fields = {k: getattr(head, k) for k in ("size", "root", "timestamp", "horizon")}
    fields["key_id"] = head.key_id  # claims the server's key
    triggers.drop(connection)
    sql("UPDATE ledger_treehead SET signature = %s WHERE id = %s", other.sign(fields), head.id)
    check = loghealth.goal_check(str(sealed[0].pk))
    assert check.failed and "carries no valid signature of this server's key" in check.detail


# ------------------------------------------------------------------ /metrics


@override_settings(WAKELEDGER_METRICS_TOKEN=SCRAPE_TOKEN)
def test_metrics_carry_the_alarm_and_each_witnesss_lag(sealed, witness_key, clock):
    found = scrape(bearer(SCRAPE_TOKEN))
    assert found[("wakeledger_log_alarm", ())] == 0
    assert found[("wakeledger_witness_lag_leaves", (("witness", WITNESS),))] == \
        TreeHead.objects.get().size
    cosigned = cosign_newest(witness_key)
    clock.advance(minutes=1)
    append_checkpoint(str(sealed[0].pk), "one more")
    newest = sealing.seal().head
    clock.advance(minutes=30)
    found = scrape(bearer(SCRAPE_TOKEN))
    assert found[("wakeledger_witness_lag_leaves", (("witness", WITNESS),))] == \
        newest.size - cosigned.size > 0
    assert found[("wakeledger_witness_lag_seconds", (("witness", WITNESS),))] == 30 * 60
    assert found[("wakeledger_witness_rollback", (("witness", WITNESS),))] == 0
    sealer_state.raise_alarm("test")
    assert scrape(bearer(SCRAPE_TOKEN))[("wakeledger_log_alarm", ())] == 1


# ------------------------------------------------------------------ notifications


def told(kind: str) -> list[Notification]:
    return list(Notification.objects.filter(kind=kind))


def test_the_alarm_is_told_once_when_it_rises_and_once_when_it_clears(sealed, channel):
    triggers.drop(connection)
    event = Event.objects.filter(goal=sealed[0], kind="checkpoint.recorded").first()
    saved = event.data
    rewrite(event)
    assert ledger("seal")[0] == 3
    assert ledger("seal")[0] == 3  # raised again: told once
    other = Event.objects.filter(goal=sealed[1], kind="checkpoint.recorded").first()
    other_data = other.data
    rewrite(other, "a second rewrite")
    alarm = sealer_state.inconsistency_alarm()
    assert ledger("seal")[0] == 3
    assert sealer_state.inconsistency_alarm() != alarm  # its words grew; still one notice
    [row] = told(notices.LOG_ALARM)
    assert "The sealer signs no head" in row.body and "/admin/ledger/treehead/" in row.body
    assert row.reason == notices.LOG_REASON
    for changed, data in ((event, saved), (other, other_data)):
        sql("UPDATE ledger_event SET data = %s WHERE id = %s", json_value(data), changed.id)
        rehash_goal(changed.goal_id)
    GoalFactory()
    assert ledger("seal")[0] == 0
    assert ledger("seal")[0] == 0
    assert len(told(notices.LOG_ALARM_CLEARED)) == 1 and len(told(notices.LOG_ALARM)) == 1


def test_a_witness_that_falls_behind_is_told_once(sealed, witness_key, channel, clock,
                                                  settings):
    settings.WAKELEDGER_WITNESS_MAX_LAG_MINUTES = 20
    cosign_newest(witness_key)
    append_checkpoint(str(sealed[0].pk), "one more")
    sealing.seal()
    clock.advance(minutes=19)
    assert loghealth.tell() == 0
    clock.advance(minutes=2)
    assert loghealth.tell() == 1
    assert loghealth.tell() == 0
    [row] = told(notices.WITNESS_BEHIND)
    assert WITNESS in row.body and "limit is 20" in row.body


def test_a_cosigned_checkpoint_the_log_does_not_hold_is_a_split_view(sealed, witness_key,
                                                                    channel, operator):
    """What the server sees of a split view: a witness cosigned a checkpoint
    of this log, signed by its key, that no stored head has."""
    from wakeledger_verify import notes
    head = TreeHead.objects.order_by("-id").first()
    forked = signing.signer().checkpoint(head.size, bytes(32))
    body = notes.split(forked)[0]
    note = forked + notes.cosign(body, WITNESS, witness_key, 1_800_000_000).line()
    answer = operator.post("ledger/checkpoint", {"checkpoint": note})
    assert answer.status_code == 404 and answer.json()["code"] == "checkpoint_unknown"
    [row] = told(notices.WITNESS_SPLIT_VIEW)
    assert WITNESS in row.body and f"size {head.size}" in row.body


def test_a_witness_holding_more_than_the_log_is_a_rollback(sealed, witness_key, channel):
    append_checkpoint(str(sealed[0].pk), "one more")
    sealing.seal()
    cosigned = cosign_newest(witness_key)
    triggers.drop(connection)
    sql("DELETE FROM ledger_logleaf WHERE position >= %s", cosigned.size - 1)
    state = loghealth.health()
    assert state.witnesses[0].rolled_back
    assert any("rolled back" in problem for problem in state.problems)
    loghealth.tell()
    [row] = told(notices.WITNESS_ROLLBACK)
    assert f"cosigned {cosigned.size} leaves" in row.body


def test_a_witness_report_names_a_kind_it_knows(channel):
    with pytest.raises(ValueError, match="split_view"):
        loghealth.witness_report(WITNESS, "gossip", 3, "?")
    assert loghealth.witness_report(WITNESS, loghealth.ROLLBACK, 7, "409: size 7") == 1
    assert loghealth.witness_report(WITNESS, loghealth.ROLLBACK, 7, "409: size 7") == 0


def test_a_c2sp_witness_whose_409_holds_more_than_the_log_is_told_as_a_rollback(
        tlog_served, channel):  # noqa: F811 (the fixture imported above)
    """The C2SP submitter follows a 409 naming a size larger than the log's
    (tests/log/test_tlog_submission.py's real add-checkpoint witness): the
    next telling reports a rollback, once."""
    from ledger.log import tlog_witness
    from wakeledger_verify import add_checkpoint
    GoalFactory(checkpoints=3)
    head = sealing.seal().head
    origin = head.checkpoint.split("\n")[0]
    tlog_served.held[origin] = add_checkpoint.Held(head.size + 5, b"\0" * 32, "")
    assert tlog_witness.submit_due()[tlog_served.name].startswith("failed: ")
    assert loghealth.tell() == 1 and loghealth.tell() == 0
    # A witness the log pushes to is on the log page and in /metrics like a pulling one.
    assert [w.name for w in loghealth.health().witnesses] == [tlog_served.name]
    [row] = told(notices.WITNESS_ROLLBACK)
    assert f"holds {head.size + 5} leaves, more than the log has" in row.body


# ------------------------------------------------------------------ the witness tells the server


@pytest.mark.django_db(transaction=True)
def test_the_witness_that_finds_a_rollback_tells_the_server_and_a_person(
        served, capsys, channel):  # noqa: F811 (the fixture imported above)
    """The real witness (wakeledger-verify witness) over HTTP: the database set
    back under it; it sends the checkpoint it accepted, which the log no longer
    has, and a person is told of the rollback."""
    from tests.log.test_log_tamper_paths import drop_tree_above
    from tests.log.test_log_witness import run_witness
    first = TreeHead.objects.order_by("id").first()
    append_checkpoint(str(served["goals"][1].pk), "later")
    sealing.seal()
    assert run_witness(served, capsys)[0] == 0
    accepted = TreeHead.objects.order_by("-id").first().size
    triggers.drop(connection)
    sql("DELETE FROM ledger_cosignature")
    drop_tree_above(first.size)
    code, out = run_witness(served, capsys)
    assert code == 3 and "ROLLBACK" in out, out
    [row] = told(notices.WITNESS_ROLLBACK)
    assert f"at size {accepted}" in row.body and not told(notices.WITNESS_SPLIT_VIEW)

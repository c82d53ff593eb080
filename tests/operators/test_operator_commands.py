"""`manage.py ledger replay | verify | bootstrap`."""


import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from ledger.eventstore import triggers
from ledger.models import Event, Goal
from tests.factories import GoalFactory
from tests.helpers import ledger

pytestmark = pytest.mark.django_db


@pytest.fixture
def goals():
    return [
        GoalFactory(),
        GoalFactory(checkpoints=3),
        GoalFactory(checkpoints=2, finish="completed"),
        GoalFactory(checkpoints=1, finish="blocked"),
        GoalFactory(checkpoints=4, finish="failed"),
    ]


def snapshot_events() -> list[tuple]:
    return list(Event.objects.order_by("id").values_list("id", "seq", "kind", "data", "hash"))


def test_replay_check_finds_no_difference_on_factory_data(goals):
    code, out, _ = ledger("replay", "--check")
    assert code == 0
    assert "replayed 5 goal(s): 0 differ" in out


def test_replay_reports_a_corrupted_projection_and_fix_repairs_it(goals):
    victim = goals[1]
    Goal.objects.filter(pk=victim.pk).update(status="done", state={**victim.state,
                                                                   "progress_pct": 99})
    events_before = snapshot_events()

    code, out, err = ledger("replay", "--check")
    assert code == 1
    assert f"goal {victim.pk} differs" in out
    assert "status: stored='done' replayed='running'" in out
    assert "state.progress_pct: stored=99 replayed=30" in out
    assert "1 projection(s) differ" in err

    code, out, _ = ledger("replay", "--fix")
    assert code == 0 and f"goal {victim.pk} fixed" in out
    assert ledger("replay", "--check")[0] == 0
    victim_after = Goal.objects.get(pk=victim.pk)
    assert victim_after.status == "running" and victim_after.state["progress_pct"] == 30
    assert snapshot_events() == events_before  # --fix never touches events


def test_replay_selected_goals_only(goals):
    Goal.objects.filter(pk=goals[0].pk).update(reason="UNCLASSIFIED")
    assert ledger("replay", "--check", str(goals[1].pk))[0] == 0
    assert ledger("replay", "--check", str(goals[0].pk))[0] == 1


def test_replay_refuses_unknown_and_malformed_ids(goals):
    code, _, err = ledger("replay", "not-a-uuid")
    assert code == 1 and "is not a goal id" in err
    code, _, err = ledger("replay", "00000000-0000-0000-0000-000000000000")
    assert code == 1 and "no such goal" in err


def test_verify_passes_on_intact_chains(goals):
    code, out, _ = ledger("verify")
    assert code == 0
    events = Event.objects.count()
    assert f"verified 5 goal(s), {events} event(s): 0 broken" in out


@pytest.mark.parametrize("tamper, why", [
    ("UPDATE ledger_event SET actor = 'mallory' WHERE goal_id = %s AND seq = 3",
     "hash does not match"),
    ("DELETE FROM ledger_event WHERE goal_id = %s AND seq = 3", "seq 4 follows seq 2"),
])
def test_verify_names_the_goal_and_seq_of_the_first_broken_link(goals, tamper, why):
    victim = goals[4]
    # Tampering needs the triggers out of the way, as an attacker with raw
    # database access would do. (DDL is transactional: the test rolls back.)
    triggers.drop(connection)
    with connection.cursor() as cursor:
        cursor.execute(tamper, [Goal._meta.pk.get_db_prep_value(victim.pk, connection)])
    triggers.install(connection)

    code, out, err = ledger("verify")
    assert code == 1
    assert f"goal {victim.pk}: chain broken at seq 3 ({why}" in out
    assert "1 broken chain(s)" in err
    assert out.count("chain broken") == 1


def test_verify_detects_a_rewritten_hash(goals):
    victim = goals[1]
    triggers.drop(connection)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE ledger_event SET hash = %s WHERE goal_id = %s AND seq = 2",
                       ["e" * 64, Goal._meta.pk.get_db_prep_value(victim.pk, connection)])
    triggers.install(connection)
    code, out, _ = ledger("verify", str(victim.pk))
    assert code == 1
    assert f"goal {victim.pk}: chain broken at seq 2" in out


def test_bootstrap_creates_the_first_admin_once_and_never_stores_the_password():
    code, out, _ = ledger("bootstrap")
    assert code == 0
    assert "URL:      http://127.0.0.1:8000/admin/" in out
    password = out.split("password: ")[1].strip()
    assert len(password) >= 20
    user = get_user_model().objects.get(username="admin")
    assert user.is_superuser and user.check_password(password)
    assert password not in user.password

    code, out, _ = ledger("bootstrap")
    assert code == 0
    assert out.strip() == "Wake Ledger admin: http://127.0.0.1:8000/admin/"
    assert get_user_model().objects.count() == 1


# ------------------------------------------------------------- the admin address printed, --help


@pytest.mark.parametrize("command", [("demo",), ("user", "create", "ann", "--role", "auditor",
                                                 "--generate")])
def test_commands_print_the_admin_address_they_know_never_a_guessed_port(
        clock, settings, command):
    import io

    from django.core.management import call_command

    settings.SITE_URL, settings.LOCAL_PORT_KNOWN = "", False
    out = io.StringIO()
    call_command("ledger", *command, stdout=out)
    assert "127.0.0.1:8000" not in out.getvalue()
    assert "/admin/ on the server's address" in out.getvalue()
    settings.SITE_URL = "https://ledger.example.org"
    out = io.StringIO()
    call_command("ledger", *(("demo", "--again") if command == ("demo",) else
                             ("user", "create", "bob", "--role", "auditor", "--generate")),
                 stdout=out)
    assert "https://ledger.example.org/admin/" in out.getvalue()
    settings.SITE_URL, settings.LOCAL_PORT_KNOWN = "", True
    settings.LOCAL_URL = "http://127.0.0.1:8123"
    out = io.StringIO()
    call_command("ledger", *(("demo", "--again") if command == ("demo",) else
                             ("user", "create", "cy", "--role", "auditor", "--generate")),
                 stdout=out)
    assert "http://127.0.0.1:8123/admin/" in out.getvalue()


def test_ledger_help_names_every_action(capsys):
    from django.core.management import call_command

    with pytest.raises(SystemExit):
        call_command("ledger", "--help")
    text = " ".join(capsys.readouterr().out.split())
    named = text.split("Wake Ledger operator commands: ", 1)[1].split(". GOAL_ID")[0]
    for action in ("wake", "doctor", "goals", "show", "alerts", "bootstrap"):
        assert action in named.split(", "), named


def test_the_ledger_commands_help_names_every_action():
    """Computed from the actions the parser has, so a new one is never left
    out (wake and doctor were)."""
    from argparse import ArgumentParser

    from ledger.management.commands.ledger import Command, add_actions

    actions = list(add_actions(ArgumentParser(add_help=False)).choices)
    assert {"wake", "doctor", "goals", "notify"} <= set(actions)
    command = Command()
    help_text = command.help
    assert all(f" {name}," in help_text or f" {name}." in help_text for name in actions)
    parser = command.create_parser("manage.py", "ledger")
    assert parser.description == help_text
    assert "wake" in parser.format_help() and "doctor" in parser.format_help()

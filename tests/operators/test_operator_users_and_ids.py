"""`manage.py ledger user create`, short goal ids in every goal-taking action,
`agent create` with several names, progress only on a terminal, and the
served addresses (skill.md, bootstrap, demo, dispatch) without SITE_URL."""

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from ledger.access.accounts import role_of
from ledger.access.models import ApiToken
from ledger.models import Goal
from ledger.project import siteurl
from tests.factories import GoalFactory
from tests.helpers import ledger_text

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def typed(monkeypatch):
    """What the operator types at getpass's prompts, on a terminal."""
    answers: list[str] = []
    monkeypatch.setattr("sys.stdin", Tty())
    monkeypatch.setattr("getpass.getpass", lambda prompt="": answers.pop(0))
    return answers


# ------------------------------------------------------------------ user create


def test_user_create_asks_twice_and_makes_a_staff_member_of_the_role(typed):
    typed += ["first-try-Secret-1", "typo", "Calm-horse-battery-9", "Calm-horse-battery-9"]
    err = io.StringIO()
    out = ledger_text("user", "create", "ayse", "--role", "auditor", "--email", "a@example.test",
                 stderr=err)
    assert "The passwords differ; try again." in err.getvalue()
    assert "created auditor ayse (staff)" in out and "/admin/" in out
    assert "Calm-horse" not in out  # a typed password is never echoed
    user = get_user_model().objects.get(username="ayse")
    assert user.is_staff and not user.is_superuser and user.email == "a@example.test"
    assert user.check_password("Calm-horse-battery-9")
    assert role_of(user) == "auditor"
    assert list(user.groups.values_list("name", flat=True)) == ["auditor"]
    assert not ApiToken.objects.filter(user=user).exists()  # people log in; no API token


def test_user_create_refuses_a_weak_password_and_gives_up_after_three_tries(typed):
    typed += ["123", "123"] * 3
    err = io.StringIO()
    with pytest.raises(CommandError, match="no password set after three tries"):
        ledger_text("user", "create", "bora", "--role", "operator", stderr=err)
    assert "too short" in err.getvalue() or "too common" in err.getvalue()
    assert not get_user_model().objects.filter(username="bora").exists()


def test_user_create_generate_prints_the_password_once():
    out = ledger_text("user", "create", "cem", "--role", "operator", "--generate")
    password = out.split("password (shown once, keep it secret): ")[1].strip()
    user = get_user_model().objects.get(username="cem")
    assert user.is_staff and role_of(user) == "operator" and user.check_password(password)
    assert password not in user.password


def test_user_create_without_a_terminal_asks_for_generate(monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO())
    with pytest.raises(CommandError, match="pass --generate"):
        ledger_text("user", "create", "deniz", "--role", "auditor")
    assert not get_user_model().objects.filter(username="deniz").exists()


def test_user_create_refuses_an_existing_name_and_the_agent_role():
    ledger_text("agent", "create", "bot-1")
    with pytest.raises(CommandError, match="exists already"):
        ledger_text("user", "create", "bot-1", "--role", "operator", "--generate")
    assert role_of(get_user_model().objects.get(username="bot-1")) == "agent"
    with pytest.raises(CommandError, match="invalid choice: 'agent'"):
        ledger_text("user", "create", "eda", "--role", "agent", "--generate")


# ------------------------------------------------------------------ agent create


def test_agent_create_takes_several_names_each_with_its_own_token():
    out = ledger_text("agent", "create", "ci-1", "ci-2", "ci-3", "--role", "agent")
    printed = [line for line in out.splitlines() if line.startswith("wl_")]
    assert len(printed) == 3 and len(set(printed)) == 3
    for n in (1, 2, 3):
        assert f"agent ci-{n}: API token (shown once, keep it secret):" in out
        assert ApiToken.objects.filter(user__username=f"ci-{n}").count() == 1


def test_agent_create_with_one_bad_name_makes_none():
    with pytest.raises(CommandError, match="NAME must be"):
        ledger_text("agent", "create", "good-1", "bad name", "good-2")
    assert not get_user_model().objects.filter(username__startswith="good-").exists()


# ------------------------------------------------------------------ short goal ids


def short(goal: Goal) -> str:
    return str(goal.pk).replace("-", "")[:8]


def test_every_goal_taking_action_accepts_the_short_id():
    from ledger.domain.runs import ReportRun
    from ledger.eventstore import store
    from tests.factories import proof_of

    blocked = GoalFactory()
    store.execute(str(blocked.pk), ReportRun(proof_of(goal_state(blocked)), "error",
                                             "unclassified", None, "", {}, "", 120),
                  actor="agent-1")
    assert Goal.objects.get(pk=blocked.pk).reason == "UNCLASSIFIED"
    ledger_text("recover", short(blocked), "--reason", "looked at it", "--operator", "op")
    assert Goal.objects.get(pk=blocked.pk).status != "blocked"
    running = GoalFactory()
    assert f"goal {running.pk}: stopped" in ledger_text("stop", short(running), "--reason", "done",
                                                   "--operator", "op")
    assert "verified 1 goal(s)" in ledger_text("verify", short(running))
    assert "replayed 1 goal(s): 0 differ" in ledger_text("replay", short(running), "--check")
    assert str(blocked.pk) in ledger_text("show", short(blocked))


def test_a_short_id_longer_than_eight_digits_and_with_hyphens():
    goal = GoalFactory()
    hexa = str(goal.pk).replace("-", "")
    for typed in (hexa[:12], str(goal.pk)[:13], hexa[:20].upper()):
        assert "verified 1 goal(s)" in ledger_text("verify", typed)


def test_approve_takes_a_short_id():
    from ledger.domain.runs import RequestApproval
    from ledger.eventstore import store
    from tests.factories import proof_of

    goal = GoalFactory()
    state = goal_state(goal)
    store.execute(str(goal.pk), RequestApproval(proof_of(state), "deploy", "ship?"),
                  actor="agent-1")
    out = ledger_text("approve", short(goal), "deploy", "--operator", "op")
    assert f"goal {goal.pk}:" in out and "blocked" not in out


def goal_state(goal: Goal):
    from ledger.domain import GoalState

    return GoalState.from_dict(Goal.objects.get(pk=goal.pk).state)


def test_an_ambiguous_or_unknown_short_id_is_a_clear_error():
    first = GoalFactory(goal_id="abcd1234-0000-4000-8000-000000000001")
    GoalFactory(goal_id="abcd1234-0001-4000-8000-000000000002")
    for action in (("verify",), ("replay",), ("stop", "--reason", "x"),
                   ("recover", "--reason", "x"), ("show",)):
        with pytest.raises(CommandError, match="matches several goals; give more digits"):
            ledger_text(action[0], "abcd1234", *action[1:])
        with pytest.raises(CommandError, match="no such goal: ffff0000"):
            ledger_text(action[0], "ffff0000", *action[1:])
    with pytest.raises(CommandError, match="is not a goal id"):
        ledger_text("stop", "xyz", "--reason", "x")
    assert "verified 1 goal(s)" in ledger_text("verify", "abcd12340000")  # more digits: one
    assert Goal.objects.get(pk=first.pk).status != "stopped"


# ------------------------------------------------------------------ progress


def test_verify_and_replay_print_no_progress_off_a_terminal():
    for _ in range(3):
        GoalFactory()
    for action in ("verify", "replay"):
        err = io.StringIO()
        out = ledger_text(action, stderr=err)
        assert err.getvalue() == "" and "3 goal(s)" in out


def test_verify_draws_a_bar_on_a_terminal():
    for _ in range(3):
        GoalFactory()
    err = Tty()
    call_command("ledger", "verify", stdout=io.StringIO(), stderr=err)
    assert "verify [" in err.getvalue() and "3/3" in err.getvalue()


# ------------------------------------------------------------------ served addresses


def test_skill_md_names_the_host_the_request_came_to(client, settings):
    settings.SITE_URL = ""
    text = client.get("/api/v1/skill.md", HTTP_HOST="127.0.0.1:8765").content.decode()
    assert "http://127.0.0.1:8765/api/v1" in text and ":8000" not in text
    settings.SITE_URL = "https://ledger.example.test"
    text = client.get("/api/v1/skill.md", HTTP_HOST="127.0.0.1:8765").content.decode()
    assert "https://ledger.example.test/api/v1" in text and "8765" not in text


def test_without_a_request_links_use_site_url_or_the_local_port(settings):
    settings.SITE_URL = ""
    settings.LOCAL_URL, settings.LOCAL_PORT_KNOWN = "http://127.0.0.1:8765", True
    assert siteurl.api_url() == "http://127.0.0.1:8765/api/v1"
    assert "http://127.0.0.1:8765/admin/" in ledger_text("bootstrap")
    assert "http://127.0.0.1:8765/admin/" in ledger_text("demo")
    settings.SITE_URL = "https://ledger.example.test"
    assert "https://ledger.example.test/admin/" in ledger_text("bootstrap")


def test_wakeledger_port_reaches_the_settings_make_run_passes_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("SITE_URL", "DATABASE_URL")}
    env.update(WAKELEDGER_PORT="8765", WAKELEDGER_VAR_DIR=str(tmp_path),
               DJANGO_SETTINGS_MODULE="ledger.project.settings")
    code = ("import django; django.setup(); from ledger.project import siteurl; "
            "from django.conf import settings; "
            "print(siteurl.api_url(), settings.LOCAL_PORT_KNOWN)")
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "http://127.0.0.1:8765/api/v1 True"
    makefile = (ROOT / "Makefile").read_text()
    assert "run: export WAKELEDGER_PORT := $(PORT)" in makefile

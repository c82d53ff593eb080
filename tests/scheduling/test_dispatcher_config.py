"""Dispatchers come from one file every process reads: `ledger wake` decides
push or pull the same from a shell with or without WAKELEDGER_DISPATCHERS,
says which, and a variable that disagrees with the
file stops the process instead of deciding otherwise. Real `manage.py`
subprocesses on their own SQLite database under a temporary var/."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from ledger.project.dispatchers import load

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "tok-do-not-print-7f3a"
CONFIG = {"cc": {"type": "command", "argv": ["true", f"--token={TOKEN}", "{goal_id}"]}}


# ------------------------------------------------------------------ the rule


def test_the_variable_seeds_the_file_0600_once(tmp_path):
    path = tmp_path / "var" / "dispatchers.json"
    config, source = load(path, json.dumps(CONFIG))
    assert config == CONFIG and "seeded" in source
    assert json.loads(path.read_text()) == CONFIG
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # Later processes, with the variable or without it, read the same.
    assert load(path, None) == (CONFIG, str(path))
    assert load(path, json.dumps(CONFIG)) == (CONFIG, str(path))


def test_a_variable_that_disagrees_with_the_file_is_refused_without_values(tmp_path):
    path = tmp_path / "dispatchers.json"
    path.write_text(json.dumps(CONFIG))
    other = {"cc": {"type": "command", "argv": ["false", "--token=other-secret"]}}
    with pytest.raises(ImproperlyConfigured) as refused:
        load(path, json.dumps(other))
    assert "disagrees" in str(refused.value)
    assert TOKEN not in str(refused.value) and "other-secret" not in str(refused.value)
    assert json.loads(path.read_text()) == CONFIG  # the file is left as it was


def test_nothing_configured_and_no_file_at_all():
    assert load(None, None) == ({}, "WAKELEDGER_DISPATCHERS")
    assert load(Path("/nonexistent/d.json"), None) == ({}, "/nonexistent/d.json (no such file)")
    assert load(None, json.dumps(CONFIG))[0] == CONFIG


def test_a_broken_file_is_refused(tmp_path):
    path = tmp_path / "dispatchers.json"
    path.write_text("{not json")
    with pytest.raises(ImproperlyConfigured, match="not valid JSON"):
        load(path, None)


# ------------------------------------------------------------- real processes

GOALS = """
import json, uuid
from ledger.domain import StartGoal
from ledger.eventstore import store
made = {}
for key, dispatch in (("bare", "cc"), ("server", "cc"), ("other", "cc"), ("pull", "gone")):
    made[key] = store.start(StartGoal(
        goal_id=str(uuid.uuid4()), workspace=f"/w/{key}", goal_key=key, objective="o",
        agent="a", policy={"dispatch": dispatch}), actor="a").state.goal_id
print(json.dumps(made))
"""


def manage(var: Path, *args: str, dispatchers: dict | None = None) -> subprocess.CompletedProcess:
    """`manage.py ARGS` as an operator's shell runs it: the project's own
    settings, a var/ of its own, the variable only when given."""
    env = {key: value for key, value in os.environ.items()
           if key not in {"WAKELEDGER_DISPATCHERS", "WAKELEDGER_DISPATCHERS_FILE",
                          "DJANGO_SETTINGS_MODULE", "DATABASE_URL", "SECRET_KEY"}}
    env["WAKELEDGER_VAR_DIR"] = str(var)
    if dispatchers is not None:
        env["WAKELEDGER_DISPATCHERS"] = json.dumps(dispatchers)
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_ledger_wake_decides_the_same_from_any_shell(tmp_path):
    if connection.vendor != "sqlite":
        pytest.skip("runs once, in the SQLite half (its processes bring their own database)")
    var = tmp_path / "var"
    # The server's start (migrate under `make run`) has the variable: it seeds the file.
    done = manage(var, "migrate", "--noinput", dispatchers=CONFIG)
    assert done.returncode == 0, done.stderr
    assert json.loads((var / "dispatchers.json").read_text()) == CONFIG

    made = manage(var, "shell", "-c", GOALS)
    assert made.returncode == 0, made.stderr
    goal = json.loads(made.stdout.strip().splitlines()[-1])

    def wake(key: str, dispatchers: dict | None = None) -> subprocess.CompletedProcess:
        return manage(var, "ledger", "wake", goal[key], "--reason", "test", "--operator", "op",
                      dispatchers=dispatchers)

    said = {}
    for shell, dispatchers in (("bare", None), ("server", CONFIG)):
        woke = wake(shell, dispatchers)
        assert woke.returncode == 0, woke.stderr
        said[shell] = woke.stdout.replace(goal[shell], "GOAL").strip()
    assert said["bare"] == said["server"]
    assert said["bare"].startswith("goal GOAL: pushed to dispatcher 'cc'"), said
    assert str(var / "dispatchers.json") in said["bare"] and TOKEN not in said["bare"]

    # A shell whose variable says otherwise is refused before it decides anything.
    other = {"cc": {"type": "command", "argv": ["false", "--token=other-secret"]}}
    refused = wake("other", other)
    assert refused.returncode != 0
    assert "WAKELEDGER_DISPATCHERS disagrees with" in refused.stderr
    assert TOKEN not in refused.stderr + refused.stdout
    assert "other-secret" not in refused.stderr + refused.stdout

    # A goal whose dispatcher is not configured is made ready for pull, and says why.
    woke = wake("pull")
    assert woke.returncode == 0, woke.stderr
    assert (f"ready for pull: its dispatcher 'gone' is not configured in {var}/dispatchers.json"
            in woke.stdout)

    # `ledger alerts` answers with its exit code, never with an error line.
    alerts = manage(var, "ledger", "alerts")
    assert alerts.returncode in (0, 1), alerts.stderr
    assert "CommandError" not in alerts.stderr + alerts.stdout
    assert "goal(s) need a human" in alerts.stdout

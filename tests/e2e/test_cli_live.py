"""The whole lifecycle over real HTTP: a live server and the `wakeledger` CLI
as a subprocess, the way an agent's shell uses it."""

import json
import os
import shutil
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from ledger.models import Event
from tests.helpers import issue_agent_token

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]  # live server, processes


@pytest.fixture
def agent_token(transactional_db):
    return issue_agent_token("cli-agent")


class Shell:
    def __init__(self, url: str, token: str, state: Path):
        self.env = {**os.environ, "WAKELEDGER_URL": url, "WAKELEDGER_TOKEN": token,
                    "WAKELEDGER_STATE_DIR": str(state), "WAKELEDGER_TIMEOUT": "10"}
        self.state = state

    def __call__(self, *args: str) -> tuple[int, dict]:
        result = subprocess.run([sys.executable, "-m", "wakeledger_agent.cli", *args], env=self.env,
                                capture_output=True, text=True, timeout=60, check=False)
        try:
            body = json.loads(result.stdout) if result.stdout.strip() else {}
        except ValueError:
            pytest.fail(f"not JSON: {result.stdout!r} {result.stderr!r}")
        return result.returncode, body


def test_agent_lifecycle_through_the_cli(live_server, agent_token, tmp_path):
    url = f"{live_server.url}/api/v1"
    one = Shell(url, agent_token, tmp_path / "one")
    two = Shell(url, agent_token, tmp_path / "two")

    code, started = one("start", "--goal-key", "cli-1", "--workspace", "/srv/cli",
                        "--objective", "Exercise the CLI", "--done", "finished",
                        "--next", "checkpoint", "--timeout", "3600", "--estimate", "600")
    assert code == 0, started
    goal_id = started["goal"]["id"]
    assert started["acquired"] is True and started["lease"]["token"] == "(saved)"
    lease_file = one.state / "leases" / f"{goal_id}.json"
    assert stat.S_IMODE(lease_file.stat().st_mode) == 0o600
    saved = json.loads(lease_file.read_text())
    assert saved["generation"] == 1 and saved["token"].startswith("wll_")

    artifact = tmp_path / "report.txt"
    artifact.write_text("hello")
    code, cp = one("checkpoint", "--step", "wrote report", "--progress", "50",
                   "--completed", "report", "--next", "finish", "--artifact", str(artifact))
    assert code == 0, cp
    assert cp["checkpoint"]["artifacts"][0]["bytes"] == 5
    assert one("heartbeat")[0] == 0
    code, shown = one("show")
    assert code == 0 and shown["progress_pct"] == 50
    code, packet = one("resume")
    assert code == 0 and packet["next_actions"] == ["finish"]

    # Validation error: exit 3, nothing recorded.
    events = Event.objects.filter(goal_id=goal_id).count()
    code, problem = one("checkpoint", "--step", "x", "--progress", "150")
    assert code == 3 and problem["code"] == "validation_error"
    assert Event.objects.filter(goal_id=goal_id).count() == events

    # A second worker cannot take a live lease: exit 8.
    code, refused = two("lease", "--goal", goal_id)
    assert code == 8 and refused["acquired"] is False

    # The first releases; the second takes generation 2; the first is fenced off.
    assert one("release")[0] == 0
    code, taken = two("lease", "--goal", goal_id)
    assert code == 0 and taken["lease"]["generation"] == 2
    shutil.copy(two.state / "leases" / f"{goal_id}.json", tmp_path / "kept.json")
    lease_file.write_text(json.dumps(saved))  # an old copy of generation 1
    code, lost = one("checkpoint", "--step", "late", "--progress", "60")
    assert code == 6 and lost["code"] == "lease_lost"
    assert not lease_file.exists()  # a lost lease is forgotten

    # Completing needs evidence for each done criterion: without it, exit 3.
    code, refused = two("finish", "--status", "completed", "--summary", "done")
    assert code == 3 and refused["code"] == "validation_error"
    assert "evidence" in refused["errors"]
    code, done = two("finish", "--status", "completed", "--summary", "done",
                     "--evidence", "finished=report.txt written, sha256 recorded")
    assert code == 0 and done["completion_state"] == "completed"
    # A terminal goal: exit 7.
    shutil.copy(tmp_path / "kept.json", two.state / "leases" / f"{goal_id}.json")
    code, terminal = two("checkpoint", "--step", "after", "--progress", "90")
    assert code == 7 and terminal["code"] == "goal_terminal"

    # Not found (5), bad token (4), unreachable server (9).
    assert one("show", "--goal", str(uuid.uuid4()))[0] == 5
    bad = Shell(url, "wl_AAAAAAAA_not-a-real-token-at-all", tmp_path / "bad")
    assert bad("show", "--goal", goal_id)[0] == 4
    offline = Shell("http://127.0.0.1:9/api/v1", agent_token, tmp_path / "off")
    assert offline("show", "--goal", goal_id)[0] == 9

    kinds = list(Event.objects.filter(goal_id=goal_id).order_by("seq")
                 .values_list("kind", flat=True))
    # The release arms the goal's watchdog (liveness); finishing cancels it.
    assert kinds == ["goal.started", "workspace.bound", "lease.acquired", "checkpoint.recorded",
                     "lease.renewed", "lease.released", "wake.scheduled", "receipt.recorded",
                     "lease.acquired", "receipt.recorded", "goal.completed"]


def test_evidence_splits_at_the_goals_own_criterion_first():
    """`--evidence CRITERION=EVIDENCE`: a criterion may itself hold "="."""
    from wakeledger_agent.cli import CliError, _evidence_item

    criteria = ["p95 <= 200 ms", "CI green"]
    assert _evidence_item("p95 <= 200 ms=k6: p95 = 181 ms", criteria) == {
        "criterion": "p95 <= 200 ms", "evidence": "k6: p95 = 181 ms"}
    assert _evidence_item("CI green=run 7 a=b", criteria) == {
        "criterion": "CI green", "evidence": "run 7 a=b"}
    # Not one of the goal's: split at the first "=" and let the server say which is unknown.
    assert _evidence_item("docs=built", criteria) == {"criterion": "docs", "evidence": "built"}
    with pytest.raises(CliError) as usage:
        _evidence_item("CI green", criteria)
    assert usage.value.exit_code == 2


# -------------------------------------------------------------------- the CLI after a rate limit


@pytest.mark.django_db(transaction=True)
def test_the_cli_says_what_is_true_after_a_rate_limit_and_names_each_refusal_once(
        live_server, tmp_path, monkeypatch, capsys):
    from tests.conftest import Api
    from wakeledger_agent import cli, errors

    agent = Api("cli-24", "agent")
    monkeypatch.setenv("WAKELEDGER_URL", live_server.url)
    monkeypatch.setenv("WAKELEDGER_TOKEN", agent.token)
    monkeypatch.setenv("WAKELEDGER_STATE_DIR", str(tmp_path))
    assert cli.main(["start", "--goal-key", "g24", "--workspace", "/srv/g24",
                     "--objective", "Try the CLI"]) == 0
    assert cli.main(["report-run", "--outcome", "error", "--error-text",
                     "429 rate limit exceeded", "--retry-after", "600"]) == 0
    capsys.readouterr()
    assert cli.main(["release"]) == errors.EXIT_LEASE_LOST
    err = capsys.readouterr().err
    assert "run `wakeledger lease` or" not in err
    assert "already released" in err and "paused until" in err
    # A domain refusal's detail is printed once, with its field named.
    assert cli.main(["start", "--goal-key", "g24b", "--workspace", "/srv/g24b",
                     "--objective", "Try the CLI again"]) == 0
    assert cli.main(["checkpoint", "--step", "half", "--progress", "50"]) == 0
    capsys.readouterr()
    assert cli.main(["checkpoint", "--step", "less", "--progress", "40"]) == errors.EXIT_CONFLICT
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.count("is below the recorded 50") == 1, line
    assert line.endswith("(field: progress_pct)"), line

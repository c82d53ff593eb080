"""Every agent endpoint through the `wakeledger` CLI, against a live server:
run reports, approvals, jobs, the watchdog, receipts and claims, the reads,
and the first-hour messages (own lease, URL without /api/v1, closed pipe,
a token without `Bearer `)."""

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client

from ledger.models import Event, Goal
from tests.factories import kinds
from tests.helpers import issue_agent_token

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]  # live server, processes

RATE_LIMIT = "Claude usage limit reached. Your limit will reset at 8am (Europe/Istanbul).\n"


@pytest.fixture
def agent_token(transactional_db):
    return issue_agent_token("cli-agent")


class Shell:
    """An agent's shell: its environment, its lease files, the CLI as a process."""

    def __init__(self, url: str, token: str, state: Path):
        self.env = {**os.environ, "WAKELEDGER_URL": url, "WAKELEDGER_TOKEN": token,
                    "WAKELEDGER_STATE_DIR": str(state), "WAKELEDGER_TIMEOUT": "10"}
        self.state = state
        self.stderr = ""

    def __call__(self, *args: str, stdin: str | None = None) -> tuple[int, dict]:
        result = subprocess.run([sys.executable, "-m", "wakeledger_agent.cli", *args], env=self.env,
                                input=stdin, capture_output=True, text=True, timeout=60,
                                check=False)
        self.stderr = result.stderr
        assert "Traceback" not in result.stderr, result.stderr
        try:
            body = json.loads(result.stdout) if result.stdout.strip() else {}
        except ValueError:
            pytest.fail(f"not JSON: {result.stdout!r} {result.stderr!r}")
        return result.returncode, body

    def lease_file(self, goal_id: str) -> Path:
        return self.state / "leases" / f"{goal_id}.json"


@pytest.fixture
def shell(live_server, agent_token, tmp_path) -> Shell:
    return Shell(f"{live_server.url}/api/v1", agent_token, tmp_path / "state")


def start(shell: Shell, key: str, *extra: str) -> str:
    code, started = shell("start", "--goal-key", key, "--workspace", f"/srv/{key}",
                          "--objective", "Exercise every command", "--done", "done",
                          "--timezone", "Europe/Istanbul", *extra)
    assert code == 0, (started, shell.stderr)
    return started["goal"]["id"]


# ------------------------------------------------------------------ the messages


def test_lease_and_start_recognise_the_lease_you_already_hold(shell, tmp_path):
    goal_id = start(shell, "own-lease")
    before = kinds(goal_id)

    code, answer = shell("lease")
    assert code == 0, shell.stderr
    assert answer["acquired"] is True and answer["already_held"] is True
    assert answer["lease"]["generation"] == 1 and answer["lease"]["token"] == "(saved)"
    assert "you already hold this goal's lease (generation 1" in shell.stderr
    # Starting the same goal again in the same shell says the same.
    code, again = shell("start", "--goal-key", "own-lease", "--workspace", "/srv/own-lease",
                        "--objective", "Exercise every command")
    assert code == 0 and again["already_held"] is True
    assert kinds(goal_id) == before  # recognising it recorded nothing
    assert shell("heartbeat")[0] == 0  # and the saved lease still works

    # Another shell (no lease file) is refused, and told who holds it.
    other = Shell(shell.env["WAKELEDGER_URL"], shell.env["WAKELEDGER_TOKEN"], tmp_path / "o")
    code, refused = other("lease", "--goal", goal_id)
    assert code == 8 and refused["acquired"] is False
    assert "the lease is held by another session (wait_for_holder" in other.stderr


def test_your_own_expired_lease_in_its_grace_is_yours_to_renew(shell, clock):
    start(shell, "own-expired", "--lease-seconds", "30")
    clock.advance(seconds=45)  # past the expiry, inside the 60 s stale grace
    code, answer = shell("lease")
    assert code == 0 and answer["already_held"] is True
    assert "it expired at" in shell.stderr and "run `wakeledger heartbeat` now" in shell.stderr
    code, renewed = shell("heartbeat")
    assert code == 0 and renewed["generation"] == 1


def test_a_url_without_api_v1_works_and_a_wrong_one_is_explained(live_server, agent_token,
                                                                  tmp_path):
    root = Shell(live_server.url, agent_token, tmp_path / "root")
    goal_id = start(root, "root-url")
    code, shown = root("show")
    assert code == 0 and shown["id"] == goal_id

    wrong = Shell(f"{live_server.url}/ledger/api/v1", agent_token, tmp_path / "wrong")
    code, body = wrong("show", "--goal", goal_id)
    assert code == 5 and body == {}
    assert "no Wake Ledger API there; check WAKELEDGER_URL" in wrong.stderr


def test_a_closed_pipe_ends_the_output_quietly(shell):
    start(shell, "pipe")
    process = subprocess.Popen([sys.executable, "-m", "wakeledger_agent", "show"], env=shell.env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # the reader (`| head`) is gone before the answer arrives
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 0
    assert stderr == ""


def test_a_token_without_bearer_is_told_the_header_format(agent_token):
    answer = Client().get("/api/v1/goals", HTTP_AUTHORIZATION=agent_token)
    assert answer.status_code == 401
    problem = answer.json()
    assert problem["code"] == "unauthenticated"
    assert "Authorization: Bearer <token>" in problem["detail"]
    assert agent_token not in answer.content.decode()
    # The CLI adds the prefix itself, and accepts a token pasted with it.
    assert Client().get("/api/v1/goals",
                        HTTP_AUTHORIZATION=f"Bearer {agent_token}").status_code == 200


def test_a_token_pasted_with_its_bearer_prefix_works_in_the_cli(shell):
    shell.env["WAKELEDGER_TOKEN"] = f"Bearer {shell.env['WAKELEDGER_TOKEN']}"
    code, listing = shell("goals")
    assert code == 0 and listing["results"] == []


# ------------------------------------------------------------------ the commands


def test_report_run_ok_then_a_rate_limit_from_stdin(shell):
    goal_id = start(shell, "rate-limit")
    code, ok = shell("report-run", "--outcome", "ok")
    assert code == 0 and ok["status"] == "running" and ok["classification"] == ""
    assert shell.lease_file(goal_id).exists()

    code, limited = shell("report-run", "--outcome", "error", "--error-text-file", "-",
                          "--retry-after", "120", "--timezone", "Europe/Istanbul",
                          stdin=RATE_LIMIT)
    assert code == 0, shell.stderr
    assert limited["classification"] == "rate_limit" and limited["status"] == "paused"
    assert limited["reset_at"] and limited["paused_until"]
    assert not shell.lease_file(goal_id).exists()  # the pause ended the lease
    # The provider's text is classified, then discarded.
    assert "usage limit" not in json.dumps(list(Event.objects.filter(goal_id=goal_id)
                                                .values_list("data", flat=True)))

    code, refused = shell("lease")
    assert code == 8 and refused["next_required_action"] == "wait_for_reset"
    assert "the goal is paused by a rate limit (wait_for_reset, retry after" in shell.stderr
    recorded = kinds(goal_id)
    at = len(recorded) - 1 - recorded[::-1].index("run.reported")
    assert recorded[at:at + 3] == ["run.reported", "goal.paused", "lease.released"]


def test_report_run_error_text_inline_and_unreadable_file(shell, tmp_path):
    start(shell, "auth-failure")
    code, _ = shell("report-run", "--outcome", "error", "--error-text-file",
                    str(tmp_path / "missing.txt"))
    assert code == 2 and "cannot read" in shell.stderr
    code, failed = shell("report-run", "--outcome", "error", "--error-text",
                         "401 Unauthorized: invalid x-api-key")
    assert code == 0 and failed["classification"] == "auth" and failed["status"] == "failed"


def test_request_approval_blocks_the_goal(shell):
    goal_id = start(shell, "approval")
    code, goal = shell("request-approval", "--gate", "deploy", "--summary", "ship v2?")
    assert code == 0, shell.stderr
    assert goal["status"] == "blocked" and goal["reason"] == "BLOCKED_APPROVAL"
    assert "approval.requested" in kinds(goal_id)


def test_jobs_are_tracked_and_updated(shell):
    goal_id = start(shell, "jobs")
    code, tracked = shell("job", "track", "--kind", "ci_run", "--ref", "gh-run-7")
    assert code == 0, shell.stderr
    job = tracked["job"]
    assert (job["kind"], job["ref"], job["status"]) == ("ci_run", "gh-run-7", "running")
    code, updated = shell("job", "status", job["job_id"], "--status", "succeeded",
                          "--conclusion", "green")
    assert code == 0 and updated["job"]["status"] == "succeeded"
    code, _ = shell("job", "status", "no-such-job", "--status", "failed")
    assert code in (3, 5, 8) and "wakeledger: " in shell.stderr
    assert Goal.objects.get(pk=goal_id).state["jobs"][0]["status"] == "succeeded"


def test_internal_watchdog_prepare_and_cancel(shell):
    goal_id = start(shell, "internal-watchdog", "--scheduler", "internal")
    code, prepared = shell("watchdog", "prepare")
    assert code == 0, shell.stderr
    assert prepared["watchdog"]["backend"] == "internal"
    code, cancelled = shell("watchdog", "cancel")
    assert code == 0, shell.stderr
    assert cancelled["watchdog"]["status"] == "cancelled"
    assert kinds(goal_id).count("receipt.recorded") >= 1


def test_host_watchdog_receipt_claim_and_cleanup(shell, clock):
    goal_id = start(shell, "host-watchdog", "--scheduler", "host")
    code, prepared = shell("watchdog", "prepare", "--tzid", "Europe/Istanbul")
    assert code == 0 and prepared["next_required_action"] == \
        "create_the_host_schedule_and_record_a_receipt"
    schedule = prepared["host_schedule"]
    assert schedule["tzid"] == "Europe/Istanbul"

    code, receipt = shell("watchdog", "receipt", "--status", "created", "--host-ref",
                          "cron-job-42", "--due-at", schedule["first_due_at"],
                          "--runs-on", "local")
    assert code == 0 and receipt["watchdog"]["status"] == "live", (receipt, shell.stderr)
    assert "cron-job-42" not in json.dumps(Goal.objects.get(pk=goal_id).state)

    # A rate limit pauses the goal; the host's next fire after the reset claims it.
    shell("report-run", "--outcome", "error", "--error-text", RATE_LIMIT)
    code, early = shell("claim", "--occurrence-id", "run-1")
    assert code == 8 and early["outcome"] == "not_due" and "no wake for this turn" in \
        shell.stderr
    clock.advance(days=2)
    code, claimed = shell("claim", "--occurrence-id", "run-2")
    assert code == 0, (claimed, shell.stderr)
    assert claimed["outcome"] == "recurring_acquired" and claimed["resume_packet"]
    assert claimed["lease"]["token"] == "(saved)"
    saved = json.loads(shell.lease_file(goal_id).read_text())
    assert saved["token"].startswith("wll_") and saved["generation"] == 2
    code, again = shell("claim", "--occurrence-id", "run-2")
    assert code == 8 and again["outcome"] == "already_claimed"

    # Finishing waits for the host schedule's deletion; the receipt completes it.
    code, finishing = shell("finish", "--status", "completed", "--summary", "done",
                            "--evidence", "done=every command ran")
    assert code == 0 and finishing["completion_state"] == "pending_native_cleanup"
    code, done = shell("watchdog", "receipt", "--status", "cancelled")
    assert code == 0 and done["completion_state"] == "completed"
    assert not shell.lease_file(goal_id).exists()
    assert Goal.objects.get(pk=goal_id).status == "done"


def test_workspace_release_and_the_reads(shell):
    goal_id = start(shell, "reads")
    code, contract = shell("contract")
    assert code == 0 and "progress_pct" in json.dumps(contract)
    code, page = shell("events", "--limit", "2")
    assert code == 0 and [e["seq"] for e in page["events"]] == [1, 2]
    assert page["next_after"] == 2
    code, rest = shell("events", "--after", "2")
    assert code == 0 and rest["events"][0]["seq"] == 3
    code, listing = shell("goals", "--status", "running")
    assert code == 0 and [g["id"] for g in listing["results"]] == [goal_id]
    code, alerts = shell("alerts")
    assert code == 0 and alerts["results"] == [] and alerts["count"] == 0
    code, released = shell("workspace-release", "--reason", "moving to another checkout")
    assert code == 0 and released["workspace_bound"] is False


@pytest.mark.parametrize(("given", "base"), [
    ("http://127.0.0.1:8000", "http://127.0.0.1:8000/api/v1"),
    ("http://127.0.0.1:8000/", "http://127.0.0.1:8000/api/v1"),
    ("http://127.0.0.1:8000/api/v1/", "http://127.0.0.1:8000/api/v1"),
    ("https://example.test/ledger", "https://example.test/ledger/api/v1"),
    ("https://example.test/ledger/api/v1", "https://example.test/ledger/api/v1"),
])
def test_the_api_base_is_found_from_what_was_given(given, base):
    from wakeledger_agent.cli import api_base

    assert api_base(given) == base


def test_release_with_a_wake_and_a_job_with_a_notify_token(shell):
    goal_id = start(shell, "wake-in")
    code, tracked = shell("job", "track", "--kind", "ci_run", "--ref", "gh-run-8", "--notify",
                          "--link", "https://ci.example/runs/8")
    assert code == 0, shell.stderr
    assert tracked["notify_token"].startswith("wlj_") and tracked["job"]["link"]
    code, released = shell("checkpoint", "--step", "pushed", "--progress", "50", "--release",
                           "--wake-in", "120", "--wake-reason", "dependency_ready")
    assert code == 0, shell.stderr
    assert released["requested_wake"]["reason"] == "dependency_ready"
    assert "wake.scheduled" in kinds(goal_id)
    code, _ = shell("release", "--wake-in", "5")  # no lease left, and too soon anyway
    assert code != 0


def test_alerts_pages_with_the_total_and_a_cursor(shell):
    """`wakeledger alerts` answers GET /alerts' page: the total, and a cursor
    (the list was once a bare array cut at 500)."""
    blocked = []
    for key in ("paged-1", "paged-2", "paged-3"):
        blocked.append(start(shell, key))
        assert shell("request-approval", "--gate", "deploy", "--summary", "ok?")[0] == 0
    code, first = shell("alerts", "--page-size", "2")
    assert code == 0 and first["count"] == 3 and first["previous"] is None
    assert [row["id"] for row in first["results"]] == blocked[:2]  # oldest first
    [cursor] = parse_qs(urlsplit(first["next"]).query)["cursor"]
    code, rest = shell("alerts", "--page-size", "2", "--cursor", cursor)
    assert code == 0 and rest["count"] == 3 and rest["next"] is None
    assert [row["id"] for row in rest["results"]] == blocked[2:]

"""Issue 24: what a newcomer and an auditor hit — each bug with the test that
failed before its fix."""

from datetime import UTC, datetime

import pytest

from ledger.domain.events import iso
from ledger.models import Goal
from tests.factories import lease_of
from tests.test_admin import staff

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"


def _start(agent, **policy):
    body = agent.start(policy={"lease_seconds": 300, **policy}).json()
    return body["goal"]["id"], lease_of(body)


# ---------------------------------------------------------------- 2. timestamps

EXTREMES = ["0001-01-01T00:00:00Z", "0999-06-01T12:00:00+00:00", "0001-01-01T00:00:00+05:00",
            "9999-12-31T23:59:59-05:00", "9999-12-31T23:59:59.999999Z"]


@pytest.mark.parametrize("at", EXTREMES)
def test_a_wake_at_any_instant_is_a_problem_never_a_500(agent, clock, at):
    gid, lease = _start(agent)
    for path, body in ((f"goals/{gid}/checkpoints",
                        {"current_step": "x", "progress_pct": 10, "release_lease": True}),
                       (f"goals/{gid}/lease/release", {})):
        answer = agent.post(path, {"lease": lease, **body,
                                   "wake": {"at": at, "reason": "scheduled_progress"}})
        assert answer.status_code == 400, answer.content
        assert answer["Content-Type"] == PROBLEM
        assert answer.json()["code"] == "time_out_of_range", answer.json()


@pytest.mark.parametrize("due", [*EXTREMES, "1970-01-01T00:00:00+00:00",
                                 "9998-12-31T23:59:59-05:00"])
def test_a_receipt_due_at_any_instant_round_trips_or_is_refused(agent, clock, due):
    gid, lease = _start(agent, cadence_minutes=60, scheduler="host")
    agent.post(f"goals/{gid}/watchdog", {"lease": lease})
    answer = agent.post(f"goals/{gid}/watchdog/receipts", {
        "lease": lease, "status": "created", "host_ref": "42", "due_at": due,
        "runs_on": "local"})
    assert answer.status_code in (200, 400), answer.content
    if answer.status_code == 400:
        # Outside what the ledger records, or (issue 35) far from the slot the
        # server prepared: never an anchor a year (or eight thousand) away.
        assert answer.json()["code"] in ("time_out_of_range", "receipt_due_at_mismatch"), \
            answer.json()
    else:
        # Accepted: it reads back, in the API and in the admin's lists.
        assert agent.get(f"goals/{gid}").status_code == 200
        assert agent.get(f"goals/{gid}/events").status_code == 200
        watchdog = Goal.objects.get(pk=gid).state["watchdog"]
        assert datetime.fromisoformat(watchdog["due_at"] if "due_at" in watchdog
                                      else watchdog["anchor"]) == datetime.fromisoformat(due)
        auditor = staff("auditor-24", "auditor")
        for url in (f"/admin/ledger/goal/{gid}/timeline/", "/admin/ledger/goal/",
                    "/admin/ledger/event/"):
            assert auditor.get(url).status_code == 200, url


def test_every_instant_the_ledger_formats_parses_back():
    for moment in (datetime(1, 1, 1, tzinfo=UTC), datetime(999, 6, 1, 12, tzinfo=UTC),
                   datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)):
        assert datetime.fromisoformat(iso(moment)) == moment
    assert iso(datetime(1, 1, 1, tzinfo=UTC)) == "0001-01-01T00:00:00.000000Z"


# ---------------------------------------------------------------- 1. admin goal URLs


def _goal_with_id(goal_id: str) -> Goal:
    from tests.factories import GoalFactory

    return GoalFactory(checkpoints=1, goal_id=goal_id)


def test_an_admin_goal_url_takes_a_prefix_says_ambiguous_or_404s():
    one = _goal_with_id("96c8cf9f-0000-4000-8000-000000000001")
    _goal_with_id("abcd1234-0000-4000-8000-000000000001")
    _goal_with_id("abcd1234-0000-4000-8000-000000000002")
    auditor = staff("auditor-24", "auditor")
    timeline = f"/admin/ledger/goal/{one.pk}/timeline/"
    # The 8 digits `ledger goals` prints open the goal, through each door.
    for url in ("/admin/ledger/goal/96c8cf9f/", "/admin/ledger/goal/96c8cf9f/change/",
                "/admin/ledger/goal/96C8-CF9F/timeline/"):
        answer = auditor.get(url, follow=True)
        assert answer.status_code == 200, url
        assert answer.redirect_chain[-1][0] == timeline, (url, answer.redirect_chain)
    # Several goals start with it: the list of them, and a message saying so.
    answer = auditor.get("/admin/ledger/goal/abcd1234/timeline/", follow=True)
    assert answer.status_code == 200
    assert "matches several goals" in answer.content.decode()
    for suffix in ("1", "2"):
        assert f"abcd1234-0000-4000-8000-00000000000{suffix}" in answer.content.decode()
    # Garbage is a 404, never a NoReverseMatch.
    for url in ("/admin/ledger/goal/abc/", "/admin/ledger/goal/abc/timeline/",
                "/admin/ledger/goal/abc/verify/", "/admin/ledger/goal/zzzzzzzz/change/",
                "/admin/ledger/goal/ffff0000/timeline/",
                "/admin/ledger/goal/00000000-0000-4000-8000-000000000000/timeline/"):
        assert auditor.get(url, follow=True).status_code == 404, url
    operator = staff("operator-24", "operator")
    assert operator.get("/admin/ledger/goal/abc/act/stop/").status_code == 404
    assert operator.post("/admin/ledger/goal/abc/act/stop/", {"reason": "x"}).status_code == 404
    answer = operator.get("/admin/ledger/goal/96c8cf9f/act/stop/", follow=True)
    assert answer.redirect_chain[-1][0] == f"/admin/ledger/goal/{one.pk}/act/stop/"
    # The goal list's search takes the prefix too.
    listed = auditor.get("/admin/ledger/goal/", {"q": "96c8cf9f"}).content.decode()
    assert str(one.pk) in listed and "abcd1234" not in listed


# ---------------------------------------------------------------- 3. a paused goal's reason


def test_a_paused_goal_says_why_everywhere_until_the_pause_ends(agent, clock):
    import io

    from django.core.management import call_command

    gid, lease = _start(agent)
    answer = agent.post(f"goals/{gid}/runs", {"lease": lease, "outcome": "error",
                                              "error_text": "429 rate limit exceeded",
                                              "retry_after": "120"})
    assert answer.json()["status"] == "paused" and answer.json()["reason"] == "RATE_LIMITED"
    assert agent.get(f"goals/{gid}").json()["reason"] == "RATE_LIMITED"
    assert [g["id"] for g in agent.get("goals", reason="RATE_LIMITED").json()["results"]] == [gid]
    assert Goal.objects.get(pk=gid).reason == "RATE_LIMITED"
    listed = staff("auditor-24", "auditor").get("/admin/ledger/goal/").content.decode()
    assert "RATE_LIMITED" in listed
    out = io.StringIO()
    call_command("ledger", "goals", stdout=out)
    assert "RATE_LIMITED" in out.getvalue()
    # The pause is over once the goal is leased again: so is its reason.
    clock.advance(seconds=3600)
    taken = agent.post(f"goals/{gid}/lease")
    assert taken.json()["acquired"], taken.json()
    body = agent.get(f"goals/{gid}").json()
    assert (body["status"], body["reason"]) == ("running", "")


# ---------------------------------------------------------------- 4. lease.active, the schema


def _schema(client) -> dict:
    import yaml

    answer = client.client.get("/api/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi")
    assert answer.status_code == 200
    return yaml.safe_load(answer.content)


def _resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node or "allOf" in node:
        ref = node["$ref"] if "$ref" in node else node["allOf"][0]["$ref"]
        node = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    return node


def test_a_granted_lease_is_active_and_the_schema_names_every_field_sent(agent, clock):
    gid, lease = _start(agent, cadence_minutes=60)
    # Right after the grant: the lease is live (active), nothing heard yet.
    granted = agent.get(f"goals/{gid}").json()["lease"]
    assert granted["active"] is True and granted["heard_from_holder"] is False
    clock.advance(seconds=200)
    agent.post(f"goals/{gid}/watchdog", {"lease": lease})
    agent.post(f"goals/{gid}/jobs", {"lease": lease, "kind": "ci", "ref": "run 7"})
    body = agent.get(f"goals/{gid}").json()
    # Every fenced call is a sign of life and renews the lease (issue 35).
    assert body["lease"]["heard_from_holder"] is True
    assert body["lease"]["expires_at"] > granted["expires_at"]
    clock.advance(seconds=301)
    assert agent.get(f"goals/{gid}").json()["lease"]["active"] is False

    schema = _schema(agent)
    goal = _resolve(schema, schema["components"]["schemas"]["Goal"])
    missing = sorted(set(body) - set(goal["properties"]))
    assert not missing, f"sent but not in the schema: {missing}"
    lease_schema = _resolve(schema, goal["properties"]["lease"])
    missing = sorted(set(body["lease"]) - set(lease_schema["properties"]))
    assert not missing, f"lease fields sent but not in the schema: {missing}"


# ---------------------------------------------------------------- 5. the resume packet's time


def test_the_resume_packet_carries_the_checkpoint_time_not_the_pull_time(agent, clock):
    gid, lease = _start(agent)
    agent.post(f"goals/{gid}/checkpoints", {"lease": lease, "current_step": "tests written",
                                            "progress_pct": 40, "release_lease": True})
    written = iso(clock())
    clock.advance(seconds=900)
    assert agent.get(f"goals/{gid}/resume").json()["checkpoint"]["updated_at"] == written
    taken = agent.post(f"goals/{gid}/lease").json()
    assert taken["acquired"]
    assert agent.get(f"goals/{gid}/resume").json()["checkpoint"]["updated_at"] == written
    assert agent.get(f"goals/{gid}/checkpoint").json()["updated_at"] == written
    assert agent.get(f"goals/{gid}").json()["updated_at"] == iso(clock())


# ---------------------------------------------------------------- 6. the admin address printed


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


# ---------------------------------------------------------------- 7. release after a rate limit


def test_release_after_a_rate_limit_says_the_lease_is_gone_and_until_when(agent, clock):
    gid, lease = _start(agent)
    paused = agent.post(f"goals/{gid}/runs", {"lease": lease, "outcome": "error",
                                              "error_text": "429 rate limit exceeded",
                                              "retry_after": "600"}).json()
    answer = agent.post(f"goals/{gid}/lease/release", {"lease": lease})
    assert answer.status_code == 409 and answer.json()["code"] == "lease_lost"
    detail = answer.json()["detail"]
    assert "acquire one" not in detail
    assert "released" in detail and paused["paused_until"] in detail
    assert answer.json()["paused_until"] == paused["paused_until"]


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


# ---------------------------------------------------------------- 8. ledger --help, "now"


def test_ledger_help_names_every_action(capsys):
    from django.core.management import call_command

    with pytest.raises(SystemExit):
        call_command("ledger", "--help")
    text = " ".join(capsys.readouterr().out.split())
    named = text.split("Wake Ledger operator commands: ", 1)[1].split(". GOAL_ID")[0]
    for action in ("wake", "doctor", "goals", "show", "alerts", "bootstrap"):
        assert action in named.split(", "), named


def test_the_goals_table_says_30s_ago_not_now(clock):
    import io

    from django.core.management import call_command

    from tests.factories import GoalFactory

    GoalFactory(checkpoints=1)
    clock.advance(seconds=30)
    out = io.StringIO()
    call_command("ledger", "goals", stdout=out)
    assert "30s ago" in out.getvalue() and " now" not in out.getvalue()


# ---------------------------------------------------------------- 9. completed means 100 %


def test_a_completed_goal_is_at_100_percent(agent, clock):
    gid, lease = _start(agent)
    agent.post(f"goals/{gid}/checkpoints", {"lease": lease, "current_step": "merged",
                                            "progress_pct": 60})
    done = agent.post(f"goals/{gid}/finish", {
        "lease": lease, "status": "completed", "summary": "merged",
        "evidence": [{"criterion": "CI green", "evidence": "run 7 green"}]})
    assert done.json()["completion_state"] == "completed", done.json()
    assert agent.get(f"goals/{gid}").json()["progress_pct"] == 100
    assert agent.get(f"goals/{gid}/checkpoint").json()["progress_pct"] == 100
    # A failed finish says nothing about progress: it stays where it was.
    failing = agent.start(goal_key="issue-2", workspace="/srv/repos/two").json()
    lease = lease_of(failing)
    gid = failing["goal"]["id"]
    agent.post(f"goals/{gid}/checkpoints", {"lease": lease, "current_step": "half",
                                            "progress_pct": 50})
    agent.post(f"goals/{gid}/finish", {"lease": lease, "status": "failed", "summary": "no"})
    assert agent.get(f"goals/{gid}").json()["progress_pct"] == 50


# ---------------------------------------------------------------- 10. security lows


def test_an_idempotency_key_is_stored_and_shown_as_its_digest_and_scanned(agent, auditor,
                                                                         clock):
    import hashlib

    from ledger.access.models import IdempotencyRecord
    from ledger.models import Event

    key = "my-run-7f3a"
    started = agent.post("goals", {"goal_key": "k", "workspace": "/srv/k", "objective": "o"},
                         key=key)
    assert started.status_code == 201
    gid = started.json()["goal"]["id"]
    digest = "sha256:" + hashlib.sha256(key.encode()).hexdigest()
    assert set(Event.objects.filter(goal_id=gid).values_list("idempotency_key", flat=True)) \
        == {digest}
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == [digest]
    event = Event.objects.filter(goal_id=gid).first()
    page = staff("auditor-24", "auditor").get(
        f"/admin/ledger/event/{event.pk}/change/").content.decode()
    assert key not in page and digest in page
    # The same key still replays; a key that is a credential is refused.
    again = agent.post("goals", {"goal_key": "k", "workspace": "/srv/k", "objective": "o"},
                       key=key)
    assert again["Idempotent-Replayed"] == "true"
    refused = agent.post("goals", {"goal_key": "k2", "workspace": "/srv/k2",
                                   "objective": "o"}, key="ghp_" + "A" * 36)
    assert refused.status_code == 400 and refused.json()["code"] == "validation_error"
    assert "credential" in refused.json()["detail"]


@pytest.mark.parametrize("control", ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e",
                                     "\u2066", "\u2067", "\u2068", "\u2069"])
def test_a_credential_split_by_a_bidi_control_is_still_caught(control):
    from ledger.domain.validation import looks_like_secret

    assert looks_like_secret(f"use ghp_{'A' * 18}{control}{'A' * 18}")


def test_a_zero_width_character_in_a_workspace_is_the_same_workspace(agent, clock):
    first = agent.start(workspace="/srv/repos/zw")
    assert first.status_code == 201
    again = agent.start(goal_key="issue-2", workspace="/srv/repos/\u200bzw")
    assert again.status_code == 409 and again.json()["code"] == "workspace_bound", again.json()
    same = agent.start(workspace="/srv/re\u2060pos/zw\ufeff")
    assert same.status_code == 200 and same.json()["goal"]["id"] == first.json()["goal"]["id"]


def test_the_notify_endpoint_answers_alike_for_an_existing_and_a_random_goal(agent, clock):
    import uuid

    from rest_framework.test import APIClient

    from ledger.services import tokens as jobtokens

    gid, lease = _start(agent)
    tracked = agent.post(f"goals/{gid}/jobs", {"lease": lease, "kind": "ci", "ref": "a",
                                               "notify": True}).json()
    job_id = tracked["job"]["job_id"]
    real = tracked["notify_token"]
    forged_same_goal = real[:-6] + ("A" * 6 if not real.endswith("AAAAAA") else "B" * 6)
    # The real token's HMAC part on a random goal id (the shape is wlj_<32 hex>_<43>).
    prefix = jobtokens.NOTIFY_PREFIX
    random_goal = prefix + uuid.uuid4().hex + real[len(prefix) + 32:]
    issued_for_random = jobtokens.notify_token(str(uuid.uuid4()), job_id)  # no such goal

    def notify(token: str):
        return APIClient().post(f"/api/v1/jobs/{job_id}/status", {"status": "succeeded"},
                                format="json", HTTP_AUTHORIZATION=f"Bearer {token}")

    answers = [notify(t) for t in (forged_same_goal, random_goal, issued_for_random)]
    assert {a.status_code for a in answers} == {404}
    assert all(a.json() == answers[0].json() for a in answers), [a.json() for a in answers]
    assert notify(real).status_code == 200


def test_var_runs_and_its_logs_are_private_from_creation(settings, tmp_path):
    import os
    import stat

    from tests.test_dispatch import echo_argv, send, wait_for_file

    old = os.umask(0o022)  # the common default, which made them 0755 / 0644
    try:
        settings.WAKELEDGER_RUNS_DIR = tmp_path / "runs"
        settings.WAKELEDGER_DISPATCHERS = echo_argv(tmp_path, "{goal_id}")
        assert send("cmd").ok
        wait_for_file(tmp_path / "argv.json")
    finally:
        os.umask(old)
    runs = tmp_path / "runs"
    assert stat.S_IMODE(runs.stat().st_mode) == 0o700
    [log] = runs.glob("*.log")
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_a_chunked_api_body_is_refused_with_411_never_read_as_empty(agent, clock):
    from ledger.models import Event

    gid, _lease = _start(agent)
    before = Event.objects.count()
    answer = agent.client.generic("POST", f"/api/v1/goals/{gid}/lease/release", b"",
                                  "application/json", HTTP_TRANSFER_ENCODING="chunked")
    assert answer.status_code == 411 and answer["Content-Type"] == PROBLEM
    assert answer.json()["code"] == "length_required"
    assert Event.objects.count() == before



# ---------------------------------------------------------------- 15, 17. lists, favicon


def test_lists_and_pages_show_utc_to_the_second_and_the_new_columns(clock):
    import re

    from ledger.models import Event
    from tests.factories import GoalFactory

    goal = GoalFactory(checkpoints=1)
    auditor = staff("auditor-24", "auditor")
    goals = auditor.get("/admin/ledger/goal/").content.decode()
    assert goal.pk.hex[:8] in goals and goal.state["objective"][:10] in goals
    assert "agent-1" in goals  # the lease holder
    assert "2026-12-02</span> <span>09:00:00 UTC" in goals
    assert "o=" in goals  # sortable headers
    events = auditor.get("/admin/ledger/event/").content.decode()
    assert 'class="wl-cut wl-cut-long"' in events and "step 1" in events  # the summary
    event = Event.objects.filter(goal=goal).first()
    page = auditor.get(f"/admin/ledger/event/{event.pk}/change/").content.decode()
    assert re.search(r"2026-12-02 09:00:00 UTC", page), "Django's own fields in UTC too"
    for text in (goals, events, page):
        assert "a.m." not in text and "p.m." not in text


def test_every_admin_page_has_a_favicon_and_so_has_the_site(clock):
    from django.contrib.staticfiles import finders
    from django.test import Client

    page = staff("auditor-24", "auditor").get("/admin/").content.decode()
    assert '<link rel="icon" type="image/svg+xml" href="/static/ledger/favicon.svg">' in page
    assert finders.find("ledger/favicon.svg")
    answer = Client().get("/favicon.ico")
    assert answer.status_code == 302 and answer["Location"] == "/static/ledger/favicon.svg"
    login = Client().get("/admin/login/").content.decode()
    assert "ledger/favicon.svg" in login


def test_a_projection_stored_before_checkpointed_at_still_has_a_checkpoint_time():
    from ledger.domain import GoalState
    from ledger.domain.smartwake import resume_packet

    old = GoalState.from_dict({"goal_id": "g", "status": "waiting",
                               "updated_at": "2026-12-01T08:00:00.000000Z"})
    assert old.checkpoint_contract()["updated_at"] == "2026-12-01T08:00:00.000000Z"
    assert resume_packet(old)["checkpoint"]["updated_at"] == "2026-12-01T08:00:00.000000Z"

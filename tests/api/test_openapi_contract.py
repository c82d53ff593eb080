"""The OpenAPI document is a contract that holds.

Schemathesis reads the schema the live server serves at /api/v1/schema and
fuzzes every operation against that same server, once per role: what the
server answers (status, content type, body) must be what the schema declares,
and never a 5xx. Its CLI runs in a subprocess: its own Hypothesis settings stay
out of the test process, and the server is spoken to over real HTTP.
"""

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command

from api.problems import PROBLEM_CONTENT_TYPE

# response_headers_conformance: the headers the schema declares required
# (WWW-Authenticate on 401, Retry-After on 429) are sent, and every declared
# header sent has the declared shape.
CHECKS = ("not_a_server_error,response_schema_conformance,content_type_conformance,"
          "status_code_conformance,response_headers_conformance")
# The bound: examples and fuzzing, 10 generated cases per operation and role
# (about 270 requests a role, ~25 s each on a busy 2-core machine). The
# coverage phase (every boundary of every field: ~1,900 requests for the agent
# alone) takes minutes here: run it by hand (docs/decisions.md, "OpenAPI
# contract").
PHASES = "examples,fuzzing"
MAX_EXAMPLES = 10
# Deterministic generation (no seed, no example database): the same cases on
# every run. One worker: with several, schemathesis 4.32 on CPython 3.11 now
# and then dies of its own threading error, and the order of requests (which
# the answers depend on) would vary.
WORKERS = 1


def schemathesis(base_url: str, token: str, workdir: Path) -> subprocess.CompletedProcess:
    command = [
        str(Path(sys.executable).with_name("schemathesis")), "run",
        f"{base_url}/api/v1/schema", "--url", base_url,
        "--header", f"Authorization: Bearer {token}",
        "--checks", CHECKS,
        "--phases", PHASES,
        "--max-examples", str(MAX_EXAMPLES),
        "--generation-deterministic",
        "--workers", str(WORKERS), "--request-timeout", "30",
        "--suppress-health-check", "all",
        "--continue-on-failure",
        "--no-color",
    ]
    env = {**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_TELEMETRY": "false",
           "COLUMNS": "120"}
    # In a directory of its own: schemathesis may leave a .schemathesis/ cache.
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False,
                          env=env, cwd=workdir)


@pytest.fixture
def fuzzed_server(live_server, settings):
    """The live server, with the bad-token throttle raised out of the way.

    Every case against POST /jobs/{job_id}/status carries an API token where a
    job's notify token belongs, and that counts as a bad token: after 20 of
    them every request from 127.0.0.1, good token or not, would be 429 for a
    minute and the rest of the run would test nothing but the throttle. The
    live server runs in this process, so the setting reaches it. (The 429
    itself is declared on every operation and checked by the schema test
    below and in test_security_http.)

    The counts stay in the database cache after the limit is restored, and a
    flush between tests does not empty that table: cleared afterwards, or the
    next minute's live tests from 127.0.0.1 get 429 in whatever order they run.
    """
    from django.core.cache import cache

    settings.WAKELEDGER_BAD_TOKEN_LIMIT = 1_000_000
    yield live_server
    cache.clear()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("role", ["agent", "auditor", "operator"])
def test_the_served_schema_holds_under_fuzzing(fuzzed_server, role, capsys, tmp_path):
    from tests.conftest import Api

    # A goal to find: schemathesis feeds ids from GET /goals and POST /goals
    # into the operations that take one, so each role reaches real answers.
    owner = Api("fuzz-owner", "agent") if role != "agent" else None
    caller = Api(f"fuzz-{role}", role)
    started = (owner or caller).start(goal_key=f"fuzz-{role}", workspace=f"/srv/fuzz/{role}")
    assert started.status_code == 201, started.content

    began = time.monotonic()
    result = schemathesis(fuzzed_server.url, caller.token, tmp_path)
    took = time.monotonic() - began
    summary = result.stdout[result.stdout.rfind("SUMMARY") - 40:]
    with capsys.disabled():  # the numbers, in `pytest -s` and in CI's log
        cases = next((line.strip() for line in summary.splitlines()
                      if " generated, " in line), "?")
        print(f"\nschemathesis as {role}: {cases} in {took:.1f} s")
    assert result.returncode == 0, f"{role}:\n{result.stdout[-12000:]}\n{result.stderr[-3000:]}"
    assert " passed" in summary and "failure" not in summary.lower(), summary


def test_every_error_is_declared_as_a_problem_document():
    """The declarations the fuzzing relies on, checked without a server: every
    non-2xx answer is application/problem+json with the Problem schema, and the
    statuses any caller, goal, body or Idempotency-Key can cause are there."""
    out = io.StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    schema = yaml.safe_load(out.getvalue())
    checked = 0
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            answers = operation["responses"]
            for status, answer in answers.items():
                media = answer["content"]
                if (where, status) == ("GET /api/v1/ledger/checkpoint", "200"):
                    assert set(media) == {"text/plain"}, where  # a C2SP signed note
                elif status.startswith("2"):
                    assert set(media) == {"application/json"}, where
                else:
                    assert set(media) == {PROBLEM_CONTENT_TYPE}, (where, status)
                    assert media[PROBLEM_CONTENT_TYPE]["schema"] == {
                        "$ref": "#/components/schemas/Problem"}, (where, status)
                    assert answer["description"], (where, status)  # the codes it carries
            statuses = set(answers)
            assert {"401", "406", "429"} <= statuses, where
            if path != "/api/v1/jobs/{job_id}/status":  # the job's own token: no roles
                assert "403" in statuses, where
            if "{goal_id}" in path or "{job_id}" in path:
                assert "404" in statuses, where
            if "requestBody" in operation:
                assert {"400", "413", "415"} <= statuses, where
                # The serializers refuse unknown fields: the schema says so.
                ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
                body = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
                assert body["additionalProperties"] is False, where
            if any(p["name"] == "Idempotency-Key" for p in operation.get("parameters", [])):
                assert {"409", "422"} <= statuses, where
            checked += 1
    assert checked >= 26
    # The problem examples are shown where the problems are: under their media type.
    heartbeat = schema["paths"]["/api/v1/goals/{goal_id}/lease/heartbeat"]["post"]
    assert heartbeat["responses"]["409"]["content"][PROBLEM_CONTENT_TYPE]["examples"]
    listing = schema["paths"]["/api/v1/goals"]["get"]
    assert listing["operationId"] == "goals_list"
    assert listing["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/GoalPage"}
    # GET /alerts is a page with a total: a list is never silently cut.
    alerts = schema["paths"]["/api/v1/alerts"]["get"]
    assert alerts["operationId"] == "alerts_list"
    assert {p["name"] for p in alerts["parameters"]} >= {"cursor", "page_size"}
    assert "400" in alerts["responses"]
    assert alerts["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/AlertPage"}
    page = schema["components"]["schemas"]["AlertPage"]
    assert set(page["required"]) == {"count", "next", "previous", "results"}
    assert page["properties"]["results"]["items"] == {"$ref": "#/components/schemas/Alert"}


# ------------------------------------------------------------ response headers


@pytest.fixture
def served(db) -> dict:
    """The schema as the server serves it (GET /api/v1/schema, no token)."""
    from rest_framework.test import APIClient

    response = APIClient().get("/api/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi")
    assert response.status_code == 200
    return yaml.safe_load(response.content)


def declared(schema: dict, method: str, path: str, status: int) -> dict:
    """The headers the schema declares for one operation's answer."""
    answer = schema["paths"][path][method.lower()]["responses"][str(status)]
    return answer.get("headers", {})


def test_every_operation_declares_the_headers_its_statuses_send(served):
    """Retry-After on every 429 (always) and on an Idempotency-Key's 409 (when
    it is in flight), WWW-Authenticate on every 401, Idempotent-Replayed on
    what an idempotent operation can replay and nowhere else."""
    checked = 0
    for path, operations in served["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            answers = operation["responses"]
            assert answers["429"]["headers"]["Retry-After"]["required"] is True, where
            assert answers["429"]["headers"]["Retry-After"]["schema"]["type"] == "integer"
            assert answers["401"]["headers"]["WWW-Authenticate"]["required"] is True, where
            idempotent = any(p["name"] == "Idempotency-Key"
                             for p in operation.get("parameters", []))
            replayable = {status for status, answer in answers.items()
                          if "Idempotent-Replayed" in answer.get("headers", {})}
            if idempotent:
                retry = answers["409"]["headers"]["Retry-After"]
                # Not every 409, unless the key's in-flight is the operation's only one.
                only_in_flight = answers["409"]["description"] == "idempotency_in_flight"
                assert retry.get("required", False) is only_in_flight, where
                oks = {status for status in answers if status.startswith("2")}
                assert oks <= replayable, where
                # Never what DRF answers before the view runs, nor the key's own conflict.
                assert not replayable & {"401", "403", "406", "413", "415", "422", "429"}, where
                assert {answers[s]["headers"]["Idempotent-Replayed"]["schema"]["enum"][0]
                        for s in replayable} == {"true"}
            else:
                assert replayable == set(), where
                for status, answer in answers.items():
                    if status not in ("429",):
                        assert "Retry-After" not in answer.get("headers", {}), (where, status)
            # A request header is not a response header, nor the other way round.
            assert {p["name"] for p in operation.get("parameters", [])} & {
                "Retry-After", "WWW-Authenticate", "Idempotent-Replayed"} == set(), where
            checked += 1
    assert checked >= 26


def test_each_header_the_server_sends_is_declared_there(served, agent, settings, clock):
    """Sent, then looked up: each header on a real answer is declared for that
    operation and status, with the value's shape the schema says."""
    from rest_framework.test import APIClient

    from api import idempotency

    def check(response, method: str, path: str, header: str) -> str:
        value = response[header]  # sent ...
        assert header in declared(served, method, path, response.status_code), \
            (method, path, response.status_code, header)  # ... and declared
        return value

    # 401 from the API token's authentication, and from a job's notify token.
    anonymous = APIClient()
    assert check(anonymous.get("/api/v1/goals"), "GET", "/api/v1/goals",
                 "WWW-Authenticate") == 'Bearer realm="wakeledger"'
    notify = anonymous.post("/api/v1/jobs/job-1/status", {"status": "completed"},
                            format="json", HTTP_AUTHORIZATION="Bearer wlj_not-a-token")
    assert notify.status_code == 401
    assert check(notify, "POST", "/api/v1/jobs/{job_id}/status",
                 "WWW-Authenticate") == 'Bearer realm="wakeledger"'

    # 429 with Retry-After, from the bad-token throttle.
    settings.WAKELEDGER_BAD_TOKEN_LIMIT = 2
    bad = APIClient(REMOTE_ADDR="203.0.113.9")
    bad.credentials(HTTP_AUTHORIZATION="Bearer wl_AbCdEfGh_never-issued")
    for _ in range(2):
        bad.get("/api/v1/goals")
    throttled = bad.get("/api/v1/goals")
    assert throttled.status_code == 429
    assert 1 <= int(check(throttled, "GET", "/api/v1/goals", "Retry-After")) <= 60

    # 201, then its replay; a refusal (409), then its replay.
    first = agent.post("goals", {"goal_key": "h-1", "workspace": "/srv/h", "objective": "o"},
                       key="h-1")
    assert first.status_code == 201 and "Idempotent-Replayed" not in first
    again = agent.post("goals", {"goal_key": "h-1", "workspace": "/srv/h", "objective": "o"},
                       key="h-1")
    assert check(again, "POST", "/api/v1/goals", "Idempotent-Replayed") == "true"
    refused = agent.post("goals", {"goal_key": "h-2", "workspace": "/srv/h", "objective": "o"},
                         key="h-2")
    assert refused.status_code == 409 and refused.json()["code"] == "workspace_bound"
    replayed = agent.post("goals", {"goal_key": "h-2", "workspace": "/srv/h", "objective": "o"},
                          key="h-2")
    assert replayed.status_code == 409
    assert check(replayed, "POST", "/api/v1/goals", "Idempotent-Replayed") == "true"

    # 409 in flight (the key found taken, its record pruned before it was
    # read): Retry-After says what the body's retry_after_seconds says.
    body = {"goal_key": "h-3", "workspace": "/srv/h3", "objective": "o"}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(idempotency, "_complete", lambda *args: False)
        busy = agent.post("goals", body, key="h-3")
    assert busy.status_code == 409 and busy.json()["code"] == "idempotency_in_flight"
    assert check(busy, "POST", "/api/v1/goals", "Retry-After") == "1" == \
        str(busy.json()["retry_after_seconds"])


def test_the_401_challenge_is_the_api_tokens_own():
    from api.auth import BearerTokenAuthentication
    from api.problems import CHALLENGE

    assert BearerTokenAuthentication().authenticate_header(None) == CHALLENGE


# ---------------------------------------------------- the schema names every field the API sends


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
    from tests.factories import start_goal

    gid, lease = start_goal(agent, cadence_minutes=60)
    # Right after the grant: the lease is live (active), nothing heard yet.
    granted = agent.get(f"goals/{gid}").json()["lease"]
    assert granted["active"] is True and granted["heard_from_holder"] is False
    clock.advance(seconds=200)
    agent.post(f"goals/{gid}/watchdog", {"lease": lease})
    agent.post(f"goals/{gid}/jobs", {"lease": lease, "kind": "ci", "ref": "run 7"})
    body = agent.get(f"goals/{gid}").json()
    # Every fenced call is a sign of life and renews the lease.
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

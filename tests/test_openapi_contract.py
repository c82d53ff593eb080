"""The OpenAPI document is a contract that holds (issue 13).

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

CHECKS = ("not_a_server_error,response_schema_conformance,content_type_conformance,"
          "status_code_conformance")
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
    """
    settings.WAKELEDGER_BAD_TOKEN_LIMIT = 1_000_000
    return live_server


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
                if status.startswith("2"):
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

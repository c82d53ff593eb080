"""Bad input, table-driven: every refusal is a problem document with a stable
code, never a 500, and nothing is recorded or changed."""

import json

import pytest
from django.conf import settings

from ledger.access.models import IdempotencyRecord
from ledger.models import Event, Goal

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"
LIMIT = settings.WAKELEDGER_MAX_BODY_BYTES
DROP = object()  # a value meaning "leave this field out"
GOAL = "goals/{gid}"

# A valid run_goal body for a second goal (the fixture's goal holds /srv/repos/shop).
START = {"goal_key": "issue-9", "workspace": "/srv/repos/other", "objective": "Ship it",
         "next_actions": ["plan"]}
CHECKPOINT = {"current_step": "tests written", "progress_pct": 40}
# A valid completion of the fixture's goal (its one done criterion is "CI green").
FINISH = {"status": "completed", "summary": "merged",
          "evidence": [{"criterion": "CI green", "evidence": "ci run 7 green"}]}


def _merge(base: dict, changes: dict, lease: dict | None = None) -> dict:
    out = dict(base)
    for name, value in changes.items():
        if callable(value):
            value = value(lease)
        if value is DROP:
            out.pop(name, None)
        else:
            out[name] = value
    return out


def start(**changes):
    return _merge(START, changes)


def fenced(base: dict | None = None, **changes):
    """A fenced body with the fixture goal's valid lease, then ``changes``."""
    return lambda lease: _merge({"lease": lease, **(base or {})}, changes, lease)


def checkpoint(**changes):
    return fenced(CHECKPOINT, **changes)


def lease_with(**changes):
    return lambda lease: _merge(lease, changes)


def artifact(**changes):
    return _merge({"path": "out/report.txt", "sha256": "a" * 64, "bytes": 10}, changes)


def escaped(body):
    """A fenced body as JSON bytes, non-ASCII as \\u escapes."""
    return lambda lease: json.dumps(body(lease)).encode()


def raw_start(text: str) -> bytes:
    return text.encode()


def sized(total: int) -> bytes:
    """A run_goal body of exactly ``total`` bytes (the objective pads it)."""
    empty = json.dumps(start(objective=""))
    return json.dumps(start(objective="x" * (total - len(empty)))).encode()


def case(id, method, path, body, status, code, field=None, *,
         content_type="application/json"):
    return pytest.param(method, path, body, content_type, status, code, field, id=id)


V, J = "validation_error", "malformed_json"
POST_GOALS = ("POST", "goals")
CP = ("POST", f"{GOAL}/checkpoints")

CASES = [
    # --- unknown fields, top level and nested
    case("unknown top-level field", *POST_GOALS, start(colour="blue"), 400, V, "colour"),
    case("unknown session field", *POST_GOALS, start(session={"sessionkey": "s"}), 400, V,
         "session.sessionkey"),
    case("unknown policy field", *POST_GOALS, start(policy={"lease_secs": 60}), 400, V,
         "policy.lease_secs"),
    case("unknown lease field", *CP, checkpoint(lease=lease_with(holder="agent-1")), 400, V,
         "lease.holder"),
    case("unknown artifact field", *CP, checkpoint(artifacts=[artifact(mode="0644")]), 400, V,
         "artifacts"),
    case("unknown checkpoint field", *CP, checkpoint(progress=40), 400, V, "progress"),
    case("acquire takes no fields", "POST", f"{GOAL}/lease", {"force": True}, 400, V, "force"),
    case("unknown finish field", "POST", f"{GOAL}/finish",
         fenced(status="completed", outcome="ok"), 400, V, "outcome"),
    case("unknown workspace/release field", "POST", f"{GOAL}/workspace/release",
         fenced(why="done"), 400, V, "why"),
    # --- wrong types
    case("list objective", *POST_GOALS, start(objective=["fix", "it"]), 400, V, "objective"),
    case("number objective", *POST_GOALS, start(objective=42), 400, V, "objective"),
    case("string done_criteria", *POST_GOALS, start(done_criteria="CI green"), 400, V,
         "done_criteria"),
    case("non-string next action", *POST_GOALS, start(next_actions=["a", {"b": 1}]), 400, V,
         "next_actions"),
    case("string session", *POST_GOALS, start(session="shop-1"), 400, V, "session"),
    case("string progress_pct", *CP, checkpoint(progress_pct="40"), 400, V, "progress_pct"),
    case("whole float progress_pct", *CP, checkpoint(progress_pct=40.0), 400, V,
         "progress_pct"),
    case("float progress_pct", *CP, checkpoint(progress_pct=40.5), 400, V, "progress_pct"),
    case("bool progress_pct", *CP, checkpoint(progress_pct=True), 400, V, "progress_pct"),
    case("null progress_pct", *CP, checkpoint(progress_pct=None), 400, V, "progress_pct"),
    case("bool generation", *CP, checkpoint(lease=lease_with(generation=True)), 400, V,
         "lease.generation"),
    case("string generation", *CP, checkpoint(lease=lease_with(generation="one")), 400, V,
         "lease.generation"),
    case("generation 0", *CP, checkpoint(lease=lease_with(generation=0)), 400, V,
         "lease.generation"),
    case("list lease", "POST", f"{GOAL}/lease/heartbeat",
         fenced(lease=lambda lease: [lease]), 400, V, "lease"),
    case("string release_lease", *CP, checkpoint(release_lease="yes"), 400, V,
         "release_lease"),
    case("bytes below 0", *CP, checkpoint(artifacts=[artifact(bytes=-1)]), 400, V,
         "artifacts"),
    # --- ranges and sizes
    case("negative progress_pct", *CP, checkpoint(progress_pct=-1), 400, V, "progress_pct"),
    case("progress_pct over 100", *CP, checkpoint(progress_pct=101), 400, V, "progress_pct"),
    case("objective 2001 chars", *POST_GOALS, start(objective="x" * 2001), 400, V,
         "objective"),
    case("current_step 501 chars", *CP, checkpoint(current_step="x" * 501), 400, V,
         "current_step"),
    case("note 4001 chars", *CP, checkpoint(note="x" * 4001), 400, V, "note"),
    case("next action 1001 chars", *POST_GOALS, start(next_actions=["x" * 1001]), 400, V,
         "next_actions"),
    case("101 next_actions", *POST_GOALS, start(next_actions=["step"] * 101), 400, V,
         "next_actions"),
    case("101 completed", *CP, checkpoint(completed=["done"] * 101), 400, V, "completed"),
    case("201 artifacts", *CP,
         checkpoint(artifacts=[artifact(path=f"f{i}") for i in range(201)]), 400, V,
         "artifacts"),
    case("lease_seconds 4", *POST_GOALS, start(policy={"lease_seconds": 4}), 400, V,
         "policy.lease_seconds"),
    case("timeout_seconds 0", *POST_GOALS, start(timeout_seconds=0), 400, V, "timeout_seconds"),
    # --- missing and empty
    case("missing objective", *POST_GOALS, start(objective=DROP), 400, V, "objective"),
    case("missing workspace", *POST_GOALS, start(workspace=DROP), 400, V, "workspace"),
    case("empty objective", *POST_GOALS, start(objective=""), 400, V, "objective"),
    case("blank objective", *POST_GOALS, start(objective="   "), 400, V, "objective"),
    case("empty body", *POST_GOALS, {}, 400, V, "goal_key"),
    case("missing current_step", *CP, checkpoint(current_step=DROP), 400, V, "current_step"),
    case("blank current_step", *CP, checkpoint(current_step="  "), 400, V, "current_step"),
    case("null lease", *CP, checkpoint(lease=None), 400, "lease_required", "lease"),
    case("checkpoint without lease", *CP, checkpoint(lease=DROP), 400, "lease_required",
         "lease"),
    case("heartbeat without lease", "POST", f"{GOAL}/lease/heartbeat", {}, 400,
         "lease_required", "lease"),
    case("release without lease", "POST", f"{GOAL}/lease/release", {}, 400, "lease_required",
         "lease"),
    case("finish without lease", "POST", f"{GOAL}/finish", FINISH, 400,
         "lease_required", "lease"),
    case("workspace/release without lease", "POST", f"{GOAL}/workspace/release", {}, 400,
         "lease_required", "lease"),
    # --- values the rules refuse
    case("uppercase sha256", *CP, checkpoint(artifacts=[artifact(sha256="A" * 64)]), 400, V,
         "artifacts"),
    case("short sha256", *CP, checkpoint(artifacts=[artifact(sha256="a" * 63)]), 400, V,
         "artifacts"),
    case("non-hex sha256", *CP, checkpoint(artifacts=[artifact(sha256="g" * 64)]), 400, V,
         "artifacts"),
    case("artifact path twice", *CP, checkpoint(artifacts=[artifact(), artifact()]), 400, V,
         "artifacts"),
    case("credential in objective", *POST_GOALS, start(objective="use sk-proj-" + "a" * 30),
         400, V, "objective"),
    case("credential in next_actions", *POST_GOALS,
         start(next_actions=["push with ghp_" + "A" * 36]), 400, V, "next_actions"),
    case("credential in note", *CP, checkpoint(note="key AKIA" + "ABCDEFGHIJKLMNOP"), 400, V,
         "note"),
    case("NUL in objective", *POST_GOALS, start(objective="a\x00b"), 400, V, "objective"),
    # JSON's "\ud800" escape decodes to a lone surrogate, which no UTF-8
    # column can store: refused per field, never a 500.
    # (Sent as the JSON text's escape: a test client cannot encode the str.)
    case("lone surrogate in note", *CP, escaped(checkpoint(note="half \ud800 a pair")), 400,
         V, "note"),
    case("lone surrogate in a completed item", *CP,
         escaped(checkpoint(completed=["ok", "\udfff"])), 400, V, "completed"),
    case("unknown scheduler", *POST_GOALS, start(policy={"scheduler": "cron"}), 400, V,
         "policy.scheduler"),
    case("non-IANA timezone", *POST_GOALS, start(session={"timezone": "Mars/Olympus"}), 400,
         V, "session.timezone"),
    case("unknown finish status", "POST", f"{GOAL}/finish", fenced(status="done"), 400, V,
         "status"),
    case("completed without summary", "POST", f"{GOAL}/finish",
         fenced(FINISH, summary=DROP), 400, V, "summary"),
    case("completed without evidence", "POST", f"{GOAL}/finish",
         fenced(FINISH, evidence=DROP), 400, V, "evidence"),
    case("evidence for an unknown criterion", "POST", f"{GOAL}/finish",
         fenced(FINISH, evidence=[*FINISH["evidence"], {"criterion": "docs", "evidence": "x"}]),
         400, V, "evidence[1].criterion"),
    case("101 evidence items", "POST", f"{GOAL}/finish",
         fenced(FINISH, evidence=FINISH["evidence"] * 101), 400, V, "evidence"),
    case("credential in evidence", "POST", f"{GOAL}/finish",
         fenced(FINISH, evidence=[{"criterion": "CI green",
                                   "evidence": "curl -H 'Bearer " + "x" * 30 + "'"}]),
         400, V, "evidence[0].evidence"),
    case("error run without error_text or retry_after", "POST", f"{GOAL}/runs",
         fenced(outcome="error"), 400, V, "error_text"),
    case("error run with a blank error_text", "POST", f"{GOAL}/runs",
         fenced(outcome="error", error_text="  \n"), 400, V, "error_text"),
    # --- bodies that are not a JSON object
    case("not JSON", *POST_GOALS, b"goal_key=issue-9", 400, J),
    case("truncated JSON", *POST_GOALS, b'{"goal_key": "issue-9", ', 400, J),
    case("whitespace only", *POST_GOALS, b"   ", 400, J),
    case("array top level", *POST_GOALS, raw_start(json.dumps([START])), 400, J),
    case("string top level", *POST_GOALS, b'"issue-9"', 400, J),
    case("null top level", *POST_GOALS, b"null", 400, J),
    case("NaN", *POST_GOALS, raw_start(json.dumps(START)[:-1] + ', "timeout_seconds": NaN}'),
         400, J),
    case("Infinity", *POST_GOALS,
         raw_start(json.dumps(START)[:-1] + ', "timeout_seconds": Infinity}'), 400, J),
    case("duplicate keys", *POST_GOALS,
         raw_start(json.dumps(START)[:-1] + ', "objective": "other"}'), 400, J),
    case("non-UTF-8", *POST_GOALS, json.dumps(START).replace("Ship it", "Ship \xe9t")
         .encode("latin-1"), 400, J),
    case("nested too deeply", *POST_GOALS, b"[" * 100_000, 400, J),
    # --- size and media type
    case("body over 256 KiB", *POST_GOALS, sized(LIMIT + 1), 413, "payload_too_large"),
    case("fenced body over 256 KiB", "POST", f"{GOAL}/lease/heartbeat", sized(LIMIT + 1), 413,
         "payload_too_large"),
    case("body of exactly 256 KiB", *POST_GOALS, sized(LIMIT), 400, V, "objective"),
    case("text/plain", *POST_GOALS, json.dumps(START).encode(), 415, "unsupported_media_type",
         content_type="text/plain"),
    case("form-encoded", *POST_GOALS, b"goal_key=issue-9", 415, "unsupported_media_type",
         content_type="application/x-www-form-urlencoded"),
    case("no content type", *POST_GOALS, json.dumps(START).encode(), 415,
         "unsupported_media_type", content_type=""),
    # --- URLs
    case("malformed goal id", "GET", "goals/not-a-uuid", None, 404, "not_found"),
    case("malformed goal id, events", "GET", "goals/not-a-uuid/events", None, 404,
         "not_found"),
    case("malformed goal id, checkpoint", "POST", "goals/not-a-uuid/checkpoints",
         checkpoint(), 404, "not_found"),
    case("unknown goal id", "GET", "goals/00000000-0000-4000-8000-000000000000/resume", None,
         404, "not_found"),
    case("unknown URL", "GET", "nope", None, 404, "not_found"),
    case("unknown URL under a goal", "POST", f"{GOAL}/pause", {}, 404, "not_found"),
    case("trailing slash", "GET", "goals/", None, 404, "not_found"),
    # --- query parameters
    case("unknown status filter", "GET", "goals", {"status": "sleeping"}, 400, V, "status"),
    case("unknown query parameter", "GET", "goals", {"stauts": "running"}, 400, V, "stauts"),
    case("page_size 0", "GET", "goals", {"page_size": "0"}, 400, V, "page_size"),
    case("page_size 201", "GET", "goals", {"page_size": "201"}, 400, V, "page_size"),
    case("events limit 0", "GET", f"{GOAL}/events", {"limit": "0"}, 400, V, "limit"),
    case("events limit 5000", "GET", f"{GOAL}/events", {"limit": "5000"}, 400, V, "limit"),
    case("events after -1", "GET", f"{GOAL}/events", {"after": "-1"}, 400, V, "after"),
    case("events after abc", "GET", f"{GOAL}/events", {"after": "abc"}, 400, V, "after"),
    case("events unknown parameter", "GET", f"{GOAL}/events", {"since": "3"}, 400, V, "since"),
]


@pytest.fixture
def goal(agent, clock):
    """agent-1's running goal, its lease, and one recorded checkpoint."""
    body = agent.start().json()
    gid = body["goal"]["id"]
    lease = {"token": body["lease"]["token"], "generation": body["lease"]["generation"]}
    recorded = agent.post(f"goals/{gid}/checkpoints", {"lease": lease, **CHECKPOINT})
    assert recorded.status_code == 201
    return gid, lease


def snapshot() -> tuple:
    return (Event.objects.count(), IdempotencyRecord.objects.count(),
            list(Goal.objects.order_by("id").values_list("id", "version", "last_hash",
                                                        "status")))


def send(api, method, path, body, content_type):
    url = f"/api/v1/{path}"
    if method == "GET":
        return api.client.get(url, body or {})
    if isinstance(body, bytes):
        return api.client.generic("POST", url, body, content_type)
    return api.client.post(url, body, format="json")


def assert_problem(response, status: int, code: str) -> dict:
    assert response.status_code != 500
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"] == PROBLEM
    body = response.json()
    assert {"type", "title", "status", "detail", "code"} <= set(body)
    assert body["status"] == response.status_code
    assert body["code"] == code
    assert body["type"] == f"urn:wakeledger:problem:{code}"
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    return body


@pytest.mark.parametrize(
    ("method", "path", "body", "content_type", "status", "code", "field"), CASES)
def test_bad_input_is_refused_and_records_nothing(agent, goal, method, path, body,
                                                  content_type, status, code, field):
    gid, lease = goal
    if callable(body):
        body = body(lease)
    before = snapshot()

    response = send(agent, method, path.format(gid=gid), body, content_type)

    problem = assert_problem(response, status, code)
    if field is not None:
        errors = problem.get("errors", {})
        assert any(key == field or key.startswith((f"{field}.", f"{field}["))
                   for key in errors), errors
        assert all(isinstance(messages, list) and messages for messages in errors.values())
    assert snapshot() == before


def test_the_valid_bodies_the_cases_start_from_are_accepted(agent, goal):
    """Each case changes one thing in a body that is otherwise accepted."""
    gid, lease = goal
    assert agent.post(f"goals/{gid}/checkpoints", checkpoint()(lease)).status_code == 201
    assert agent.post("goals", start()).status_code == 201
    assert agent.post(f"goals/{gid}/runs", fenced(outcome="ok")(lease)).status_code == 200
    assert agent.post(f"goals/{gid}/finish", fenced(FINISH)(lease)).status_code == 200


def test_the_limits_themselves_are_accepted(agent, goal):
    gid, lease = goal
    started = agent.post("goals", start(objective="x" * 2000, next_actions=["y" * 1000] * 100,
                                        done_criteria=["z"] * 100))
    assert started.status_code == 201, started.content[:300]
    for pct in (40, 100):  # progress may stay put, and reach 100
        cp = agent.post(f"goals/{gid}/checkpoints", checkpoint(
            progress_pct=pct, current_step="s" * 500, note="n" * 4000,
            artifacts=[artifact(path=f"f{i}", bytes=0) for i in range(200)])(lease))
        assert cp.status_code == 201, cp.content[:300]


def test_a_refused_request_with_an_idempotency_key_does_not_run_the_command(agent, goal):
    """A refusal is replayable, but only the record of it is stored: no event."""
    gid, lease = goal
    before = Event.objects.count()
    response = agent.post(f"goals/{gid}/checkpoints", checkpoint(progress_pct=101)(lease),
                          key="bad-1")
    assert_problem(response, 400, V)
    assert Event.objects.count() == before


@pytest.mark.parametrize("index", [0, 1])
def test_error_keys_name_the_list_index_as_the_domain_does(agent, goal, index):
    """The serializer's paths (a bad sha256) and the domain's (a path given
    twice) share one notation, index 0 included: artifacts[0].sha256."""
    gid, lease = goal
    items = [artifact(path="a"), artifact(path="b")]
    items[index] = artifact(path="bad", sha256="A" * 64)
    response = agent.post(f"goals/{gid}/checkpoints", checkpoint(artifacts=items)(lease))
    assert list(assert_problem(response, 400, V)["errors"]) == [f"artifacts[{index}].sha256"]

    items[index] = artifact(path="a" if index else "b")  # the other item's path again
    response = agent.post(f"goals/{gid}/checkpoints", checkpoint(artifacts=items)(lease))
    assert list(assert_problem(response, 400, V)["errors"]) == ["artifacts[1].path"]


@pytest.mark.parametrize(("method", "path", "status"), [
    ("DELETE", GOAL, 405), ("PUT", "goals", 405), ("PATCH", f"{GOAL}/checkpoints", 405),
    ("GET", f"{GOAL}/lease", 405), ("HEAD", GOAL, 200), ("OPTIONS", "goals", 200),
])
def test_a_method_an_endpoint_does_not_have_is_405_not_403(agent, goal, method, path,
                                                            status):
    gid, _ = goal
    before = snapshot()
    response = agent.client.generic(method, "/api/v1/" + path.format(gid=gid))
    assert response.status_code == status, response.content
    if status == 405:
        assert_problem(response, 405, "method_not_allowed")
    assert snapshot() == before


def test_an_unknown_url_is_a_problem_for_every_method(agent):
    for method in ("GET", "POST", "DELETE"):
        response = agent.client.generic(method, "/api/v1/goals/x/y/z")
        body = assert_problem(response, 404, "not_found")
        assert "/api/v1/goals/x/y/z" in body["detail"]


# -------------------------------------------------------------------------------- chunked bodies


def test_a_chunked_api_body_is_refused_with_411_never_read_as_empty(agent, clock):
    from ledger.models import Event
    from tests.factories import start_goal

    gid, _lease = start_goal(agent)
    before = Event.objects.count()
    answer = agent.client.generic("POST", f"/api/v1/goals/{gid}/lease/release", b"",
                                  "application/json", HTTP_TRANSFER_ENCODING="chunked")
    assert answer.status_code == 411 and answer["Content-Type"] == PROBLEM
    assert answer.json()["code"] == "length_required"
    assert Event.objects.count() == before

"""Who may call what: a role x endpoint matrix over every /api/v1/ endpoint,
bearer-token failures, and the `ledger agent create | revoke` commands."""

import json
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.db import connection
from rest_framework.test import APIClient

from ledger.access import accounts
from ledger.access.models import ApiToken
from ledger.eventstore import clock as ledger_clock
from ledger.log import sealing
from ledger.models import Event, Goal
from tests.factories import COMPLETED
from tests.helpers import ledger_text

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"
WWW_AUTHENTICATE = 'Bearer realm="wakeledger"'
# A lease of the right shape that no one was ever granted: what another agent
# could send without knowing the owner's token.
GUESSED_LEASE = {"token": "wll_guessed", "generation": 1}


def fenced(**extra):
    """A body builder for a fenced call: ``lease`` is the caller's lease."""
    return lambda lease: {"lease": lease or GUESSED_LEASE, **extra}


def workspace_release(lease):
    # The holder proves its lease; an operator releases without one.
    return {"lease": lease} if lease else {"reason": "agent crashed"}


NEW_GOAL = {"goal_key": "issue-77", "workspace": "/srv/repos/new", "objective": "Ship it",
            "next_actions": ["plan"]}

# name -> (method, path under /api/v1/ with {gid}, body builder or None)
ENDPOINTS = {
    "GET goals": ("GET", "goals", None),
    "POST goals": ("POST", "goals", lambda lease: dict(NEW_GOAL)),
    "GET goal": ("GET", "goals/{gid}", None),
    "GET checkpoint": ("GET", "goals/{gid}/checkpoint", None),
    "GET events": ("GET", "goals/{gid}/events", None),
    "GET resume": ("GET", "goals/{gid}/resume", None),
    "POST lease": ("POST", "goals/{gid}/lease", lambda lease: {}),
    "POST heartbeat": ("POST", "goals/{gid}/lease/heartbeat", fenced()),
    "POST release": ("POST", "goals/{gid}/lease/release", fenced()),
    "POST checkpoints": ("POST", "goals/{gid}/checkpoints",
                         fenced(current_step="tests written", progress_pct=40)),
    "POST finish": ("POST", "goals/{gid}/finish", fenced(**COMPLETED)),
    "POST workspace/release": ("POST", "goals/{gid}/workspace/release", workspace_release),
    "POST watchdog": ("POST", "goals/{gid}/watchdog", fenced(tzid="UTC")),
    "DELETE watchdog": ("DELETE", "goals/{gid}/watchdog", fenced()),
    # The goal's watchdog is internal: a host receipt reaches the domain and is refused.
    "POST receipts": ("POST", "goals/{gid}/watchdog/receipts", fenced(status="cancelled")),
    "POST claim": ("POST", "goals/{gid}/claim", lambda lease: {"occurrence_id": "run-1"}),
    # A running goal waits for no reset: not_a_reset, nothing recorded (a 200).
    "POST continuations": ("POST", "goals/{gid}/continuations",
                           lambda lease: {"host": "claude-code", "trigger": "prompt"}),
    "POST jobs": ("POST", "goals/{gid}/jobs", fenced(kind="ci_run", ref="gh-run-1")),
    # No job job-1 on the goal: the owner reaches the domain's not_found.
    "POST job status": ("POST", "goals/{gid}/jobs/job-1/status", fenced(status="succeeded")),
    "POST runs": ("POST", "goals/{gid}/runs", fenced(outcome="ok")),
    # The goal's own lease is live: a turn under it is no one's by hand (a 400).
    "POST session-activity": ("POST", "goals/{gid}/session-activity",
                              lambda lease: {"session": {"session_key": "s-1"}}),
    "POST approvals": ("POST", "goals/{gid}/approvals", fenced(gate="deploy")),
    # No pending gate "deploy": the operator reaches the domain's not_found.
    "POST resolve": ("POST", "goals/{gid}/approvals/deploy/resolve",
                     lambda lease: {"decision": "approve"}),
    "POST stop": ("POST", "goals/{gid}/stop", lambda lease: {"reason": "wrong repo"}),
    # A running goal is not recoverable: the operator reaches the domain's refusal.
    "POST recover": ("POST", "goals/{gid}/recover", lambda lease: {"reason": "retry"}),
    # The agent holds a live lease: there is nothing to wake (not_wakeable).
    "POST wake": ("POST", "goals/{gid}/wake", lambda lease: {"reason": "reset came early"}),
    "GET alerts": ("GET", "alerts", None),
    # The verifiable log; the goal fixture seals, so there is a head.
    "GET log head": ("GET", "ledger/head", None),
    "GET log heads": ("GET", "ledger/heads", None),
    "GET inclusion proof": ("GET", "ledger/proof/inclusion?event={event}", None),
    "GET consistency proof": ("GET", "ledger/proof/consistency?from=1", None),
    # The checkpoint note; a witness's cosignature (not a note: refused
    # by the view, so the roles that may send one reach its validation).
    "GET log checkpoint": ("GET", "ledger/checkpoint", None),
    "POST cosignature": ("POST", "ledger/checkpoint", lambda lease: {"checkpoint": "x"}),
    "GET log tail": ("GET", "ledger/tail", None),
}
# About the whole log, not one goal: their answers name no goal.
LOG_WIDE = {"GET log head", "GET log heads", "GET consistency proof", "GET log checkpoint",
            "POST cosignature", "GET log tail"}
GOAL_SCOPED = [name for name, (_, path, _) in ENDPOINTS.items() if "{gid}" in path]

# The matrix. "agent" owns the goal; "other_agent" is another agent.
#   endpoint                  agent  other_agent  auditor  operator
MATRIX = [
    ("GET goals",               200,   200,         200,     200),
    ("POST goals",              201,   201,         403,     403),
    ("GET goal",                200,   404,         200,     200),
    ("GET checkpoint",          200,   404,         200,     200),
    ("GET events",              200,   404,         200,     200),
    ("GET resume",              200,   404,         200,     200),
    ("POST lease",              200,   404,         403,     403),
    ("POST heartbeat",          200,   404,         403,     403),
    ("POST release",            200,   404,         403,     403),
    ("POST checkpoints",        201,   404,         403,     403),
    ("POST finish",             200,   404,         403,     403),
    ("POST workspace/release",  200,   404,         403,     200),
    ("POST watchdog",           200,   404,         403,     403),
    ("DELETE watchdog",         200,   404,         403,     403),
    ("POST receipts",           400,   404,         403,     403),
    ("POST claim",              200,   404,         403,     403),
    ("POST continuations",      200,   404,         403,     403),
    ("POST jobs",               201,   404,         403,     403),
    ("POST job status",         404,   404,         403,     403),
    ("POST runs",               200,   404,         403,     403),
    ("POST session-activity",   400,   404,         403,     403),
    ("POST approvals",          200,   404,         403,     403),
    ("POST resolve",            403,   403,         403,     404),
    ("POST stop",               403,   403,         403,     200),
    ("POST recover",            403,   403,         403,     409),
    ("POST wake",               403,   403,         403,     409),
    ("GET alerts",              200,   200,         200,     200),
    ("GET log head",            200,   200,         200,     200),
    ("GET log heads",           200,   200,         200,     200),
    ("GET inclusion proof",     200,   404,         200,     200),
    ("GET consistency proof",   403,   403,         200,     200),
    ("GET log checkpoint",      200,   200,         200,     200),
    ("POST cosignature",        403,   403,         400,     400),
    ("GET log tail",            403,   403,         200,     200),
]
ROLES = ("agent", "other_agent", "auditor", "operator")
CODES = {400: "validation_error", 401: "unauthenticated", 403: "forbidden", 404: "not_found",
         409: "not_recoverable"}


def test_the_matrix_names_every_api_v1_endpoint():
    """A new endpoint must be added to the matrix, not silently skipped."""
    from api import urls

    # job-notify takes a job's own notify token, never a role's API token
    # (tests/scheduling/test_requested_wakes.py checks every role is refused there).
    documentation = {"health", "skill", "schema", "docs", "job-notify"}
    assert [name for name, *_ in MATRIX] == list(ENDPOINTS)
    paths = {path.partition("?")[0] for _, path, _ in ENDPOINTS.values()}
    assert {str(p.pattern).replace("<str:goal_id>", "{gid}").replace("<str:job_id>", "job-1")
            .replace("<str:gate>", "deploy")
            for p in urls.urlpatterns if p.name not in documentation} == paths


@pytest.fixture
def goal(agent, clock):
    """agent-1's running goal with its lease, sealed into the log under a signed head."""
    body = agent.start().json()
    sealing.seal()
    return body["goal"]["id"], {"token": body["lease"]["token"],
                                "generation": body["lease"]["generation"]}


def call(client: APIClient, endpoint: str, gid: str, lease: dict | None):
    method, path, body = ENDPOINTS[endpoint]
    first = Event.objects.filter(goal_id=gid).order_by("seq").values_list("id", flat=True)
    url = "/api/v1/" + path.format(gid=gid, event=first.first())
    if method == "GET":
        return client.get(url)
    return client.generic(method, url, json.dumps(body(lease)), "application/json")


def snapshot() -> tuple:
    return (Event.objects.count(),
            list(Goal.objects.order_by("id").values_list("id", "version", "last_hash")))


def assert_problem(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == PROBLEM
    body = response.json()
    assert body["status"] == status and body["code"] == code
    assert body["type"] == f"urn:wakeledger:problem:{code}"
    assert body["title"] and body["detail"]
    return body


CASES = [pytest.param(endpoint, role, expected, id=f"{endpoint}-{role}")
         for endpoint, *row in MATRIX for role, expected in zip(ROLES, row, strict=True)]


@pytest.mark.parametrize(("endpoint", "role", "expected"), CASES)
def test_role_matrix(request, goal, endpoint, role, expected):
    gid, lease = goal
    caller = request.getfixturevalue(role)
    before = snapshot()

    own_lease = {"agent": lease, "other_agent": GUESSED_LEASE}.get(role)
    response = call(caller.client, endpoint, gid, own_lease)

    if expected >= 400:
        code = "not_wakeable" if endpoint == "POST wake" and expected == 409 else CODES[expected]
        assert_problem(response, expected, code)
        assert snapshot() == before, "a refused call recorded something"
        return
    assert response.status_code == expected, response.content
    if endpoint == "GET alerts":
        assert response.json()["results"] == []  # a running goal needs no human
        assert response.json()["count"] == 0
    elif endpoint in LOG_WIDE:
        assert snapshot() == before
    elif ENDPOINTS[endpoint][0] == "GET":
        # Readers see the goal; another agent does not even see it listed.
        assert (gid in response.content.decode()) is (role != "other_agent")
        assert snapshot() == before
    elif endpoint == "POST goals":
        body = response.json()
        assert body["created"] is True and body["goal"]["agent"] == caller.username
    elif endpoint == "POST workspace/release":
        assert response.json() == {"workspace": "/srv/repos/shop", "workspace_bound": False}
    elif endpoint not in ("POST lease", "DELETE watchdog", "POST continuations"):
        # (The owner's acquire is refused politely: it holds the lease; there
        # was no watchdog to cancel; and a running goal waits for no reset.)
        assert Event.objects.count() > before[0]


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
@pytest.mark.parametrize("who", ["anonymous", "garbage token", "unknown prefix",
                                 "wrong secret", "revoked token", "inactive user",
                                 "other scheme"])
def test_without_valid_credentials_every_endpoint_is_401(agent, goal, who, endpoint):
    gid, lease = goal
    client = APIClient()
    header = {
        "anonymous": None,
        "garbage token": "Bearer garbage",
        "unknown prefix": "Bearer wl_ABCDEFGH_" + "x" * 43,
        "wrong secret": f"Bearer {agent.token[:-1]}{'B' if agent.token[-1] == 'A' else 'A'}",
        "revoked token": f"Bearer {agent.token}",
        "inactive user": f"Bearer {agent.token}",
        "other scheme": f"Token {agent.token}",
    }[who]
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    if who == "revoked token":
        ApiToken.objects.filter(user__username="agent-1").update(
            revoked_at=ledger_clock.now())
    if who == "inactive user":
        get_user_model().objects.filter(username="agent-1").update(is_active=False)
    before = snapshot()

    response = call(client, endpoint, gid, lease)

    assert_problem(response, 401, "unauthenticated")
    assert response["WWW-Authenticate"] == WWW_AUTHENTICATE
    assert gid not in response.content.decode()
    assert snapshot() == before


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_a_valid_token_without_a_role_is_403(goal, endpoint):
    gid, lease = goal
    user = get_user_model().objects.create(username="roleless")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {accounts.issue_token(user)}")
    before = snapshot()

    response = call(client, endpoint, gid, lease)

    body = assert_problem(response, 403, "forbidden")
    assert "no role" in body["detail"]
    assert "WWW-Authenticate" not in response
    assert snapshot() == before


@pytest.mark.parametrize("endpoint", GOAL_SCOPED)
def test_another_agent_cannot_tell_a_foreign_goal_from_a_missing_one(goal, other_agent,
                                                                     endpoint):
    gid, _ = goal
    missing = str(uuid.uuid4())
    method, path, _ = ENDPOINTS[endpoint]
    answers = []
    for target in (gid, missing):
        url = "/api/v1/" + path.format(gid=target)
        if method == "GET":
            answers.append([other_agent.client.get(url)])
        else:  # a well-formed body, and one the serializer refuses
            answers.append([call(other_agent.client, endpoint, target, GUESSED_LEASE),
                            other_agent.client.post(url, {"bogus": 1}, format="json")])
    for foreign, absent in zip(*answers, strict=True):
        assert foreign.status_code == absent.status_code
        assert foreign.content.decode().replace(gid, missing) == absent.content.decode()
    # Operator endpoints refuse every agent by role, before looking for a goal.
    assert answers[0][0].status_code == (403 if endpoint in OPERATOR_ONLY else 404)


OPERATOR_ONLY = {"POST resolve", "POST stop", "POST recover", "POST wake"}


@pytest.mark.parametrize(("role", "status"), [
    ("agent", 200), ("other_agent", 404), ("auditor", 200), ("operator", 200),
    ("anonymous", 401),
])
def test_head_follows_the_rules_of_get(request, goal, role, status):
    gid, _ = goal
    client = APIClient() if role == "anonymous" else request.getfixturevalue(role).client
    assert client.head(f"/api/v1/goals/{gid}/events").status_code == status


def test_options_tells_another_agent_nothing_about_a_foreign_goal(goal, other_agent):
    gid, _ = goal
    foreign = other_agent.client.options(f"/api/v1/goals/{gid}/events")
    missing = other_agent.client.options(f"/api/v1/goals/{uuid.uuid4()}/events")
    assert foreign.status_code == missing.status_code
    assert foreign.content == missing.content
    assert gid not in foreign.content.decode()


def test_another_agent_starting_the_same_work_gets_neither_the_goal_nor_its_lease(
        goal, other_agent, agent, operator):
    """Workspace paths are host-local and goal keys the agent's own names: the
    same (workspace, goal_key) from another agent is that agent's own goal, and
    tells it nothing about agent-1's, which is left exactly as it was."""
    gid, lease = goal
    before = Goal.objects.filter(pk=gid).values_list("version", "last_hash").get()
    response = other_agent.start()  # the same workspace and goal key as agent-1's goal
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["created"] is True and body["goal"]["id"] != gid
    assert body["goal"]["agent"] == "agent-2" and body["goal"]["workspace_bound"] is True
    assert gid not in response.content.decode()
    assert lease["token"] not in response.content.decode()
    assert Goal.objects.filter(pk=gid).values_list("version", "last_hash").get() == before
    # agent-1 still holds its goal and its lease; neither sees the other's goal.
    assert agent.post(f"goals/{gid}/lease/heartbeat", {"lease": lease}).status_code == 200
    assert_problem(other_agent.get(f"goals/{gid}"), 404, "not_found")
    assert_problem(agent.get(f"goals/{body['goal']['id']}"), 404, "not_found")
    # Operators see both.
    listed = operator.get("goals", workspace="/srv/repos/shop").json()["results"]
    assert sorted(g["agent"] for g in listed) == ["agent-1", "agent-2"]


def test_another_agents_goals_are_not_listed_even_when_filtered_by_agent(goal, other_agent):
    listed = other_agent.get("goals", agent="agent-1")
    assert listed.status_code == 200 and listed.json()["results"] == []
    own = other_agent.get("goals")
    assert own.status_code == 200 and own.json()["results"] == []


def test_a_superusers_token_acts_as_an_operator(goal):
    gid, lease = goal
    root = get_user_model().objects.create_superuser("root", password="pw-for-the-test")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {accounts.issue_token(root)}")
    assert call(client, "GET events", gid, None).status_code == 200
    assert_problem(call(client, "POST checkpoints", gid, lease), 403, "forbidden")
    assert call(client, "POST workspace/release", gid, None).status_code == 200


# ------------------------------------------------------------- manage.py ledger agent


def test_agent_create_prints_a_token_once_and_stores_only_prefix_and_digest(goal):
    gid, _ = goal
    printed = ledger_text("agent", "create", "audit-bot", "--role", "auditor")
    token = printed.split()[-1]
    assert token.startswith("wl_")
    assert "auditor audit-bot" in printed
    prefix = token.split("_")[1]
    assert len(prefix) == 8

    with connection.cursor() as cursor:
        cursor.execute("SELECT prefix, digest FROM api_apitoken WHERE prefix = %s", [prefix])
        rows = cursor.fetchall()
        cursor.execute("SELECT * FROM api_apitoken")
        table = repr(cursor.fetchall())
    assert len(rows) == 1
    stored_prefix, stored_digest = rows[0]
    assert stored_prefix == prefix
    assert len(stored_digest) == 64 and stored_digest != token
    secret = token.split("_", 2)[2]
    assert token not in table and secret not in table

    listing = ledger_text("agent", "list")
    assert prefix in listing and token not in listing and secret not in listing

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.get(f"/api/v1/goals/{gid}/events").status_code == 200
    assert_problem(client.post("/api/v1/goals", NEW_GOAL, format="json"), 403, "forbidden")

    assert ledger_text("agent", "revoke", prefix).strip() == f"revoked {prefix}"
    refused = client.get(f"/api/v1/goals/{gid}/events")
    assert_problem(refused, 401, "unauthenticated")
    assert refused["WWW-Authenticate"] == WWW_AUTHENTICATE
    with pytest.raises(CommandError, match="no active token"):
        ledger_text("agent", "revoke", prefix)


def test_agent_create_issues_a_new_token_each_time_and_revoking_one_keeps_the_other(db):
    first = ledger_text("agent", "create", "worker-1").split()[-1]
    second = ledger_text("agent", "create", "worker-1").split()[-1]
    assert first != second
    ledger_text("agent", "revoke", first.split("_")[1])
    for token, status in ((first, 401), (second, 200)):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        assert client.get("/api/v1/goals").status_code == status


def test_agent_create_refuses_to_change_a_users_role(db):
    ledger_text("agent", "create", "audit-bot", "--role", "auditor")
    with pytest.raises(CommandError, match="already has the role auditor"):
        ledger_text("agent", "create", "audit-bot", "--role", "operator")


# ------------------------------------------------ the notify endpoint tells no goal from another


def test_the_notify_endpoint_answers_alike_for_an_existing_and_a_random_goal(agent, clock):
    import uuid

    from rest_framework.test import APIClient

    from ledger.services import tokens as jobtokens
    from tests.factories import start_goal

    gid, lease = start_goal(agent)
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

"""/mcp on the open internet: what it refuses before a message is read
(Host, Origin, size, credentials, the bad-token throttle, calls per minute),
the discovery documents an OAuth client starts from, the stateless JSON mode's
edges, roles as the REST API has them, and a lease kept as a derivation only."""

import json
from typing import Any

import pytest
from django.core.cache import cache

from tests.helpers import issue_agent_token

pytestmark = pytest.mark.django_db

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "test", "version": "0"}}}


@pytest.fixture(autouse=True)
def fresh_counters():
    cache.clear()  # the bad-token and rate counters live in the shared cache
    yield
    cache.clear()


def rpc(client, message: Any, token: str | None = None, **headers: str):
    if token:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client.post("/mcp", data=json.dumps(message), content_type="application/json",
                       HTTP_ACCEPT="application/json, text/event-stream", **headers)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}


def test_a_caller_without_a_credential_is_told_where_to_authorize(client):
    answer = rpc(client, INIT)
    assert answer.status_code == 401
    challenge = answer["WWW-Authenticate"]
    assert challenge.startswith("Bearer ") and 'resource_metadata="http://testserver/' \
        '.well-known/oauth-protected-resource/mcp"' in challenge
    resource = client.get("/.well-known/oauth-protected-resource/mcp").json()
    assert resource["resource"] == "http://testserver/mcp"
    assert resource["authorization_servers"] == ["http://testserver"]
    server = client.get("/.well-known/oauth-authorization-server").json()
    assert server["issuer"] == "http://testserver"
    assert server["code_challenge_methods_supported"] == ["S256"]  # no "plain"
    assert server["response_types_supported"] == ["code"]
    assert server["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert server["registration_endpoint"] == "http://testserver/oauth/register/"
    assert server["revocation_endpoint"] == "http://testserver/oauth/revoke/"
    assert "none" in server["token_endpoint_auth_methods_supported"]


def test_a_client_registers_itself_and_gets_nothing_until_an_operator_consents(client):
    registered = client.post("/oauth/register/", data=json.dumps({
        "client_name": "Hosted", "redirect_uris": ["https://connector.example/callback"],
        "token_endpoint_auth_method": "none", "grant_types": ["authorization_code",
                                                             "refresh_token"],
        "response_types": ["code"]}), content_type="application/json")
    assert registered.status_code == 201, registered.content
    client_id = registered.json()["client_id"]
    authorize = (f"/oauth/authorize/?response_type=code&client_id={client_id}"
                 "&redirect_uri=https://connector.example/callback&code_challenge="
                 "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256"
                 "&state=s&scope=mcp")
    # Not signed in: to the admin's login page first.
    assert client.get(authorize)["Location"].startswith("/admin/login/")
    # Signed in without the operator role: refused.
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user("reader", password="pw-reader-1", is_staff=True)
    client.login(username="reader", password="pw-reader-1")
    assert client.get(authorize).status_code == 403
    # "plain" PKCE is refused even to an operator.
    get_user_model().objects.create_superuser("boss", password="pw-boss-1")
    client.login(username="boss", password="pw-boss-1")
    issue_agent_token("worker")
    page = client.get(authorize)
    assert page.status_code == 200 and b"worker" in page.content
    assert "form-action 'self' https://connector.example" in page["Content-Security-Policy"]
    plain = client.get(authorize.replace("S256", "plain"))
    assert plain.status_code == 400 and b"worker" not in plain.content


def test_registrations_from_one_address_are_limited(client, monkeypatch):
    from ledger.access.accounts import Window

    monkeypatch.setattr("api.mcp.oauth_clients.REGISTRATIONS", Window("oauth-register", 2, 3600))
    body = json.dumps({"client_name": "c", "redirect_uris": ["https://c.example/cb"],
                       "token_endpoint_auth_method": "none"})
    answers = [client.post("/oauth/register/", data=body, content_type="application/json")
               for _ in range(3)]
    assert [a.status_code for a in answers] == [201, 201, 429]
    assert int(answers[-1]["Retry-After"]) > 0


def test_origin_host_and_size_are_checked_before_the_credential(client, settings):
    token = issue_agent_token("agent-o")
    assert rpc(client, INIT, token).status_code == 200
    assert rpc(client, INIT, token, HTTP_ORIGIN="http://testserver").status_code == 200
    # A page elsewhere (DNS rebinding): refused, whatever the token.
    evil = rpc(client, INIT, token, HTTP_ORIGIN="http://evil.example")
    assert evil.status_code == 403 and evil.json()["code"] == "forbidden"
    settings.WAKELEDGER_MCP_ALLOWED_ORIGINS = ["http://evil.example"]
    assert rpc(client, INIT, token, HTTP_ORIGIN="http://evil.example").status_code == 200
    assert rpc(client, INIT, token, HTTP_HOST="rebound.example").status_code == 400
    settings.WAKELEDGER_MAX_BODY_BYTES = 1024
    big = call("get_goal", goal_id="x" * 2000)
    assert rpc(client, big, token).status_code == 413


def test_bad_tokens_are_throttled_and_each_credential_rate_limited(client, settings):
    settings.WAKELEDGER_BAD_TOKEN_LIMIT = 2
    token = issue_agent_token("agent-t")
    assert rpc(client, INIT, "wl_nottoken_x").status_code == 401
    bad = rpc(client, INIT, "some-oauth-looking-token")
    assert bad.status_code == 401 and 'error="invalid_token"' in bad["WWW-Authenticate"]
    locked = rpc(client, INIT, token)  # even a good token, from this address, for a while
    assert locked.status_code == 429 and int(locked["Retry-After"]) > 0
    cache.clear()
    settings.WAKELEDGER_MCP_CALLS_PER_MINUTE = 2
    assert [rpc(client, INIT, token).status_code for _ in range(2)] == [200, 200]
    limited = rpc(client, INIT, token)
    assert limited.status_code == 429 and limited.json()["code"] == "throttled"
    # Another credential has its own allowance.
    assert rpc(client, INIT, issue_agent_token("agent-u")).status_code == 200


def test_the_stateless_json_mode(client):
    token = issue_agent_token("agent-s")
    answer = rpc(client, INIT, token)
    body = answer.json()
    assert answer["Content-Type"] == "application/json" and "Mcp-Session-Id" not in answer
    assert body["result"]["protocolVersion"] == "2025-06-18"
    assert body["result"]["capabilities"]["tools"] == {"listChanged": False}
    assert "claim_scheduled_continuation" in body["result"]["instructions"]
    assert rpc(client, {"jsonrpc": "2.0", "method": "notifications/initialized"},
               token).status_code == 202
    get = client.get("/mcp", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert get.status_code == 405 and get["Allow"] == "POST"
    assert rpc(client, [INIT], token).status_code == 400  # no batches
    assert rpc(client, INIT, token, HTTP_MCP_PROTOCOL_VERSION="2025-06-18").status_code == 200
    assert rpc(client, INIT, token, HTTP_MCP_PROTOCOL_VERSION="1999-01-01").status_code == 400
    unknown = rpc(client, {"jsonrpc": "2.0", "id": 3, "method": "server/discover"}, token)
    assert unknown.json()["error"]["code"] == -32601  # the SDK then falls back to initialize
    broken = client.post("/mcp", data=b"{", content_type="application/json",
                         HTTP_AUTHORIZATION=f"Bearer {token}")
    assert broken.status_code == 400 and broken.json()["error"]["code"] == -32700


def test_roles_and_the_lease_kept_as_a_derivation(client):
    from django.contrib.auth.models import Group

    from ledger.access.models import McpLease

    token = issue_agent_token("agent-r")
    started = rpc(client, call("run_goal", goal_key="g", workspace="/srv/g",
                               objective="o", done_criteria=["d"]), token).json()["result"]
    assert not started.get("isError"), started
    goal_id = started["structuredContent"]["goal"]["id"]
    assert "wll_" not in json.dumps(started)
    row = McpLease.objects.get(goal_id=goal_id)
    assert "wll_" not in json.dumps([row.holder, row.owner, row.key, row.path])
    # The kept lease works from any process: a fenced call just carries it.
    beat = rpc(client, call("heartbeat", goal_id=goal_id), token).json()["result"]
    assert not beat.get("isError"), beat
    # An auditor may read, not write: the REST API's roles.
    auditor = issue_agent_token("auditor-r")
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(username="auditor-r")
    user.groups.set([Group.objects.get_or_create(name="auditor")[0]])
    refused = rpc(client, call("run_goal", goal_key="a", workspace="/srv/a", objective="o",
                               done_criteria=["d"]), auditor).json()["result"]
    assert refused["isError"] and refused["structuredContent"]["code"] == "forbidden"
    seen = rpc(client, call("get_goal", goal_id=goal_id), auditor).json()["result"]
    assert seen["structuredContent"]["id"] == goal_id


def test_an_auditor_sees_every_grant_and_revocation_and_no_secret(client):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from ledger.access.models import OAuthAudit

    OAuthAudit.objects.create(kind="granted", client_id="cid-1", client_name="Hosted",
                              agent="worker", by="boss")
    OAuthAudit.objects.create(kind="revoked", client_id="cid-1", client_name="Hosted",
                              agent="worker", by="client")
    auditor = get_user_model().objects.create_user("eve", password="pw-eve-1", is_staff=True)
    auditor.groups.add(Group.objects.get(name="auditor"))
    client.login(username="eve", password="pw-eve-1")
    page = client.get("/admin/api/oauthaudit/")
    assert page.status_code == 200
    assert page.content.count(b"cid-1") == 2 and b"revoked" in page.content
    assert client.get("/admin/oauth2_provider/accesstoken/").status_code == 200
    # Read-only, for the auditor and everyone else.
    assert client.get("/admin/api/oauthaudit/add/").status_code == 403


def test_instructions_name_the_url_the_client_came_to(client, settings, monkeypatch):
    # Only the public name is allowed, and the tool table is built afresh
    # under it (as a new web process builds it on its first call).
    settings.ALLOWED_HOSTS = ["ledger.example.com"]
    monkeypatch.setattr("api.mcp.inprocess._tools", ())
    token = issue_agent_token("agent-h")
    answer = rpc(client, INIT, token, HTTP_HOST="ledger.example.com")
    assert answer.status_code == 200
    assert "http://ledger.example.com/api/v1" in answer.json()["result"]["instructions"]
    listed = rpc(client, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, token,
                 HTTP_HOST="ledger.example.com")
    assert len(listed.json()["result"]["tools"]) == 16

"""OAuth for /mcp's hosted connectors, by the book: the audience of every
token, where a code may be sent, what a replayed code or refresh token
costs, what survives an agent's deactivation, the consent page, Client ID
Metadata Documents, and registration under hostile input. Driven through
the real endpoints with Django's client (the browser-run flow is in
tests/e2e/test_mcp_http.py and test_mcp_oauth_browser.py)."""

import base64
import hashlib
import json
import secrets
import urllib.parse
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from tests.helpers import issue_agent_token
from tests.oauth_documents import Documents, serve_documents

pytestmark = pytest.mark.django_db

CALLBACK = "https://connector.example/callback"
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


@pytest.fixture(autouse=True)
def fresh_counters():
    cache.clear()  # throttles and the codes' record live in the shared cache
    yield
    cache.clear()


def register(client, redirect_uri: str = CALLBACK, **extra: Any):
    return client.post("/oauth/register/", data=json.dumps({
        "client_name": "Hosted", "redirect_uris": [redirect_uri],
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
        **extra}), content_type="application/json")


def operator(client) -> None:
    get_user_model().objects.create_superuser("boss", password="pw-boss-1")
    client.login(username="boss", password="pw-boss-1")


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    return verifier, challenge.rstrip(b"=").decode()


def authorize_url(client_id: str, challenge: str, redirect_uri: str = CALLBACK,
                  **extra: str) -> str:
    query = {"response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri,
             "code_challenge": challenge, "code_challenge_method": "S256", "state": "st-1",
             "scope": "mcp", **extra}
    return "/oauth/authorize/?" + urllib.parse.urlencode(query)


def consent(client, client_id: str, challenge: str, agent: str = "worker",
            redirect_uri: str = CALLBACK, **extra: str):
    """The operator's GET of the consent page and its Authorize."""
    page = client.get(authorize_url(client_id, challenge, redirect_uri, **extra))
    assert page.status_code == 200, page.content
    fields = {k: v for k, v in page.context["form"].initial.items() if v is not None}
    return client.post(authorize_url(client_id, challenge, redirect_uri, **extra),
                       {**fields, "agent": agent, "allow": "Authorize"})


def code_from(answer) -> str:
    assert answer.status_code == 302, answer.content
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(answer["Location"]).query)
    return query["code"][0]


def exchange(client, client_id: str, code: str, verifier: str, redirect_uri: str = CALLBACK):
    return client.post("/oauth/token/", {
        "grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
        "client_id": client_id, "code_verifier": verifier})


def refresh(client, client_id: str, token: str):
    return client.post("/oauth/token/", {"grant_type": "refresh_token",
                                          "refresh_token": token, "client_id": client_id})


def mcp(client, token: str) -> int:
    return client.post("/mcp", data=json.dumps(PING), content_type="application/json",
                       HTTP_ACCEPT="application/json, text/event-stream",
                       HTTP_AUTHORIZATION=f"Bearer {token}").status_code


def connected(client, **extra: str) -> tuple[str, dict[str, Any]]:
    """A registered connector, authorized as agent "worker": its client id and tokens."""
    issue_agent_token("worker")
    client_id = register(client).json()["client_id"]
    operator(client)
    verifier, challenge = pkce()
    code = code_from(consent(client, client_id, challenge, **extra))
    tokens = exchange(client, client_id, code, verifier)
    assert tokens.status_code == 200, tokens.content
    return client_id, {**tokens.json(), "code": code, "verifier": verifier}


def audit_kinds() -> list[str]:
    from ledger.access.models import OAuthAudit

    return list(OAuthAudit.objects.order_by("recorded_at", "id").values_list("kind", flat=True))


# ---------------------------------------------------------------- the resource (RFC 8707)

def test_a_token_issued_for_another_resource_is_refused_at_mcp(client):
    from oauth2_provider.models import AccessToken, Application, set_token_value

    client_id, tokens = connected(client, resource="http://testserver/mcp")
    assert mcp(client, tokens["access_token"]) == 200
    found = AccessToken.objects.get(token_checksum=hashlib.sha256(
        tokens["access_token"].encode()).hexdigest())
    assert found.resource == ["http://testserver/mcp"]
    # The same agent and connector, a token whose audience is elsewhere.
    elsewhere = AccessToken(user=found.user, application=Application.objects.get(
        client_id=client_id), scope="mcp", expires=timezone.now() + timedelta(hours=1),
        resource=["https://other.example.com/mcp"])
    set_token_value(elsewhere, "other-resource-token")
    elsewhere.save()
    assert mcp(client, "other-resource-token") == 401


def test_the_authorization_server_issues_tokens_for_mcp_only(client):
    issue_agent_token("worker")
    client_id = register(client).json()["client_id"]
    operator(client)
    _, challenge = pkce()
    page = client.get(authorize_url(client_id, challenge,
                                    resource="https://other.example.com/mcp"))
    assert b"invalid_target" in page.content and b"authorizationForm" not in page.content
    back = urllib.parse.parse_qs(urllib.parse.urlsplit(page.context["return_url"]).query)
    assert back["error"] == ["invalid_target"] and back["state"] == ["st-1"]


def test_the_resource_may_be_spelled_with_a_slash_or_capitals(client):
    _, tokens = connected(client, resource="HTTP://TestServer/mcp/")
    assert mcp(client, tokens["access_token"]) == 200


def test_a_client_that_names_no_resource_gets_tokens_for_mcp(client):
    from oauth2_provider.models import AccessToken

    _, tokens = connected(client)
    found = AccessToken.objects.get(token_checksum=hashlib.sha256(
        tokens["access_token"].encode()).hexdigest())
    assert found.resource == ["http://testserver/mcp"]
    assert mcp(client, tokens["access_token"]) == 200


# ---------------------------------------------------------------- redirects

def test_plain_http_redirects_go_to_the_loopback_address_only(client, settings):
    from oauth2_provider.models import Application

    assert "http" in settings.OAUTH2_PROVIDER["ALLOWED_REDIRECT_URI_SCHEMES"]  # no HTTPS profile
    refused = register(client, "http://evil.example/cb")
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_redirect_uri"
    assert register(client, "http://127.0.0.1:8123/cb").status_code == 201
    assert register(client, "http://[::1]:8123/cb").status_code == 201
    # A client registered before the rule (or by hand) gets no code there either.
    issue_agent_token("worker")
    old = Application.objects.create(name="Old", client_type="public",
                                     authorization_grant_type="authorization-code",
                                     redirect_uris="http://evil.example/cb")
    operator(client)
    _, challenge = pkce()
    url = authorize_url(old.client_id, challenge, "http://evil.example/cb")
    page = client.get(url)
    assert page.status_code == 400 and b"authorizationForm" not in page.content
    assert not page.context.get("return_url") and b"Wake Ledger" in page.content
    posted = client.post(url, {"client_id": old.client_id, "redirect_uri":
                               "http://evil.example/cb", "response_type": "code",
                               "scope": "mcp", "state": "s", "code_challenge": challenge,
                               "code_challenge_method": "S256", "agent": "worker",
                               "allow": "Authorize"})
    assert "code=" not in posted.get("Location", "")


# ---------------------------------------------------------------- replays

def test_a_replayed_code_revokes_the_tokens_of_its_first_exchange(client):
    client_id, tokens = connected(client)
    assert mcp(client, tokens["access_token"]) == 200
    again = exchange(client, client_id, tokens["code"], tokens["verifier"])
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    assert mcp(client, tokens["access_token"]) == 401
    assert refresh(client, client_id, tokens["refresh_token"]).status_code == 400
    assert audit_kinds()[-1] == "code_reused"


def test_a_reused_refresh_token_kills_its_family_and_leaves_an_audit_row(client):
    client_id, tokens = connected(client)
    rotated = refresh(client, client_id, tokens["refresh_token"]).json()
    assert mcp(client, rotated["access_token"]) == 200
    reused = refresh(client, client_id, tokens["refresh_token"])
    assert reused.status_code == 400
    assert mcp(client, rotated["access_token"]) == 401
    from ledger.access.models import OAuthAudit

    row = OAuthAudit.objects.get(kind="refresh_reused")
    assert (row.agent, row.client_id) == ("worker", client_id)
    # A replay of a dead family adds no row each time.
    refresh(client, client_id, tokens["refresh_token"])
    assert OAuthAudit.objects.filter(kind="refresh_reused").count() == 1


# ---------------------------------------------------------------- an agent's access

def test_reactivating_an_agent_does_not_bring_its_tokens_back(client):
    client_id, tokens = connected(client)
    worker = get_user_model().objects.get(username="worker")
    worker.is_active = False
    worker.save()
    assert mcp(client, tokens["access_token"]) == 401
    worker.is_active = True
    worker.save()
    assert mcp(client, tokens["access_token"]) == 401
    assert refresh(client, client_id, tokens["refresh_token"]).status_code == 400
    from ledger.access.models import OAuthAudit

    row = OAuthAudit.objects.filter(kind="revoked").get()
    assert (row.agent, row.by) == ("worker", "agent deactivated")


def test_an_agent_put_back_in_its_group_gets_no_tokens_back(client):
    from django.contrib.auth.models import Group

    client_id, tokens = connected(client)
    worker = get_user_model().objects.get(username="worker")
    agents = Group.objects.get(name="agent")
    worker.groups.remove(agents)
    worker.groups.add(agents)
    assert mcp(client, tokens["access_token"]) == 401
    assert refresh(client, client_id, tokens["refresh_token"]).status_code == 400
    # From the group's side too.
    client_id, tokens = connected_again(client, client_id)
    agents.user_set.clear()
    worker.groups.add(agents)
    assert mcp(client, tokens["access_token"]) == 401
    from ledger.access.models import OAuthAudit

    assert OAuthAudit.objects.filter(kind="revoked", by="agent role removed").count() == 2


def connected_again(client, client_id: str) -> tuple[str, dict[str, Any]]:
    verifier, challenge = pkce()
    code = code_from(consent(client, client_id, challenge))
    return client_id, exchange(client, client_id, code, verifier).json()


def test_the_consent_page_is_the_products_and_chooses_no_agent(client):
    issue_agent_token("aaa-first")
    issue_agent_token("worker")
    client_id = register(client).json()["client_id"]
    operator(client)
    page = client.get(authorize_url(client_id, pkce()[1]))
    text = page.content.decode()
    assert "Django administration" not in text and "Wake Ledger" in text
    assert '<option value="" selected>' in text
    assert '<option value="aaa-first" selected>' not in text
    # Authorize without choosing: refused on the page, no code.
    posted = client.post(authorize_url(client_id, pkce()[1]), {
        **{k: v for k, v in page.context["form"].initial.items() if v is not None},
        "allow": "Authorize"})
    assert posted.status_code == 200 and b"Choose the agent" in posted.content


def test_only_an_operator_may_authorize_and_is_told_so(client):
    client_id = register(client).json()["client_id"]
    get_user_model().objects.create_user("reader", password="pw-reader-1", is_staff=True)
    client.login(username="reader", password="pw-reader-1")
    page = client.get(authorize_url(client_id, pkce()[1]))
    assert page.status_code == 403 and b"Only an operator" in page.content


# ---------------------------------------------------------------- registration (RFC 7591)

DEEP = b'{"client_name": "x", "redirect_uris": ' + b"[" * 3000 + b"]" * 3000 + b"}"
HOSTILE = [
    ("deep nesting", DEEP, "application/json", 400, "invalid_client_metadata"),
    ("lone surrogate", b'{"client_name": "\\ud800", "redirect_uris": ["https://c.example/cb"]}',
     "application/json", 400, "invalid_client_metadata"),
    ("NUL", b'{"client_name": "a\\u0000b", "redirect_uris": ["https://c.example/cb"]}',
     "application/json", 400, "invalid_client_metadata"),
    ("huge number", b'{"client_name": "c", "software_version": ' + b"9" * 5000 + b"}",
     "application/json", 400, "invalid_client_metadata"),
    ("a number as the name", b'{"client_name": 1e999, "redirect_uris": []}',
     "application/json", 400, "invalid_client_metadata"),
    ("an object as the name", b'{"client_name": {"a": 1}, "redirect_uris": []}',
     "application/json", 400, "invalid_client_metadata"),
    ("text/plain", b'{"client_name": "c", "redirect_uris": ["https://c.example/cb"]}',
     "text/plain", 415, "invalid_client_metadata"),
    ("form", b"client_name=c", "application/x-www-form-urlencoded", 415,
     "invalid_client_metadata"),
    ("UTF-16", '{"client_name": "c"}'.encode("utf-16"), "application/json", 400,
     "invalid_client_metadata"),
    ("not an object", b"[]", "application/json", 400, "invalid_client_metadata"),
    ("too large", b'{"client_name": "' + b"x" * 300_000 + b'"}', "application/json", 413,
     "invalid_client_metadata"),
    ("a redirect URI that is not a string", b'{"redirect_uris": [1]}', "application/json",
     400, "invalid_redirect_uri"),
    ("a redirect URI with a bad port", b'{"redirect_uris": ["https://c.example:99999/cb"]}',
     "application/json", 400, "invalid_redirect_uri"),
]


@pytest.mark.parametrize(("body", "content_type", "status", "code"),
                         [case[1:] for case in HOSTILE], ids=[case[0] for case in HOSTILE])
def test_hostile_registrations_get_a_4xx_with_a_stable_code(client, body, content_type,
                                                             status, code):
    from oauth2_provider.models import Application

    answer = client.post("/oauth/register/", data=body, content_type=content_type)
    assert (answer.status_code, answer.json()["error"]) == (status, code)
    assert not Application.objects.exists()


def test_every_registration_attempt_counts_against_the_address(client, monkeypatch):
    from ledger.access.accounts import Window

    monkeypatch.setattr("api.mcp.oauth_clients.REGISTRATIONS", Window("oauth-register", 2, 3600))
    answers = [register(client, "http://evil.example/cb") for _ in range(2)]
    answers.append(register(client))  # a good one, too late
    assert [a.status_code for a in answers] == [400, 400, 429]
    assert answers[-1].json()["error"] == "invalid_client_metadata"


def test_each_registration_is_audited(client):
    from ledger.access.models import OAuthAudit

    client_id = register(client).json()["client_id"]
    row = OAuthAudit.objects.get()
    assert (row.kind, row.client_id, row.client_name) == ("registered", client_id, "Hosted")
    assert row.by == "dynamic registration from 127.0.0.1"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8)
METADATA = st.fixed_dictionaries({}, optional={
    "client_name": JSON_VALUES, "redirect_uris": JSON_VALUES | st.lists(st.text(), max_size=3),
    "grant_types": JSON_VALUES, "response_types": JSON_VALUES,
    "token_endpoint_auth_method": JSON_VALUES | st.sampled_from(["none", "client_secret_post"]),
    "scope": JSON_VALUES}) | JSON_VALUES


@hsettings(max_examples=60, deadline=None,
           suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=METADATA)
def test_no_registration_document_is_a_server_error(client, monkeypatch, document):
    from ledger.access.accounts import Window

    monkeypatch.setattr("api.mcp.oauth_clients.REGISTRATIONS",
                        Window("oauth-register", 10**6, 3600))
    # ensure_ascii: a lone surrogate travels as its \ud800 escape, as an attacker sends it.
    answer = client.post("/oauth/register/", data=json.dumps(document, ensure_ascii=True),
                         content_type="application/json")
    assert answer.status_code in (201, 400), answer.content
    assert answer.json().get("error") in (None, "invalid_client_metadata", "invalid_redirect_uri")


OAUTH_POSTS = [
    ("post", "/oauth/token/", b"grant_type=authorization_code&code=%ED%A0%80&client_id=\x00",
     "application/x-www-form-urlencoded"),
    ("post", "/oauth/token/", DEEP, "application/json"),
    ("post", "/oauth/token/", b"grant_type=refresh_token&refresh_token=" + b"9" * 5000,
     "application/x-www-form-urlencoded"),
    ("post", "/oauth/revoke/", b"token=%00%ED%A0%80", "application/x-www-form-urlencoded"),
    ("post", "/oauth/revoke/", DEEP, "application/json"),
    ("put", "/oauth/register/abc/", DEEP, "application/json"),
    ("get", "/oauth/authorize/?response_type=code&client_id=%00", b"", "text/plain"),
]


@pytest.mark.parametrize(("method", "path", "body", "content_type"), OAUTH_POSTS)
def test_the_other_oauth_endpoints_answer_hostile_bodies_with_a_4xx(client, method, path, body,
                                                                     content_type):
    answer = getattr(client, method)(path, data=body, content_type=content_type)
    assert 400 <= answer.status_code < 500
    assert answer.json()["error"]


# ---------------------------------------------------------------- Client ID Metadata Documents

@pytest.fixture
def metadata_host(tmp_path, monkeypatch):
    with serve_documents(tmp_path, monkeypatch) as base:
        yield base


def test_a_connector_identified_by_its_metadata_document(client, settings, metadata_host):
    from oauth2_provider.models import Application

    from ledger.access.models import OAuthAudit

    server = client.get("/.well-known/oauth-authorization-server").json()
    assert server["client_id_metadata_document_supported"] is True
    assert server["registration_endpoint"].endswith("/oauth/register/")  # still the fallback
    client_id = f"{metadata_host}/connector.json"
    Documents.served["/connector.json"] = json.dumps({
        "client_id": client_id, "client_name": "Documented connector",
        "redirect_uris": [CALLBACK], "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"]}).encode()
    issue_agent_token("worker")
    operator(client)
    verifier, challenge = pkce()
    # A private address is not fetched unless configured: no request leaves.
    refused = client.get(authorize_url(client_id, challenge))
    assert refused.status_code >= 400 and b"authorizationForm" not in refused.content
    assert Documents.hits == [] and not Application.objects.exists()
    cache.clear()  # DOT backs a failed URL off for a minute
    settings.WAKELEDGER_OAUTH_CIMD_PRIVATE_NETWORKS = ["127.0.0.0/8", "::1/128"]
    page = client.get(authorize_url(client_id, challenge))
    assert page.status_code == 200 and b"Documented connector" in page.content
    assert Documents.hits == ["/connector.json"]
    row = OAuthAudit.objects.get(kind="registered")
    assert (row.client_id, row.by) == (client_id, "metadata document")
    code = code_from(consent(client, client_id, challenge))
    tokens = exchange(client, client_id, code, verifier).json()
    assert mcp(client, tokens["access_token"]) == 200
    assert OAuthAudit.objects.filter(kind="registered").count() == 1  # not again


FORM_TEXT = st.text(st.characters(codec="utf-8") | st.sampled_from(["\x00", "\U0010ffff"]),
                    max_size=40)


@hsettings(max_examples=60, deadline=None,
           suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(["/oauth/token/", "/oauth/revoke/"]),
       fields=st.dictionaries(st.sampled_from(["grant_type", "code", "client_id",
                                               "redirect_uri", "code_verifier", "refresh_token",
                                               "token", "token_type_hint", "resource"])
                              | FORM_TEXT, FORM_TEXT, max_size=6))
def test_no_form_sent_to_the_token_endpoints_is_a_server_error(client, path, fields):
    answer = client.post(path, fields)
    assert answer.status_code < 500, answer.content
    if answer.status_code >= 400:
        assert answer.json()["error"]

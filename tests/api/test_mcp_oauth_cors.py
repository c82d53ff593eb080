"""CORS on the OAuth side of /mcp, for a browser-based MCP client: the
metadata documents readable from any Origin, registration, the token
endpoint and revocation answering the Origins /mcp accepts (and no other),
the authorization page answering none, and never a credentialed answer.
Chromium enforcing these headers is tests/e2e/test_mcp_oauth_browser.py."""

import json
import urllib.parse
from typing import Any

import pytest
from django.core.cache import cache
from django.test import RequestFactory
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from api.mcp import guard
from tests.api.test_mcp_oauth import CALLBACK, code_from, consent, operator, pkce
from tests.helpers import issue_agent_token

pytestmark = pytest.mark.django_db

LISTED = "https://app.example"
UNLISTED = "https://evil.example"
METADATA = ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-authorization-server")
ENDPOINTS = ("/oauth/register/", "/oauth/token/", "/oauth/revoke/")
FORM = "application/x-www-form-urlencoded"


@pytest.fixture(autouse=True)
def listed(settings):
    cache.clear()  # the registration throttle lives in the shared cache
    settings.WAKELEDGER_MCP_ALLOWED_ORIGINS = [LISTED]
    yield
    cache.clear()


def preflight(client, path: str, origin: str, method: str = "POST",
              headers: str = "content-type"):
    return client.options(path, headers={"Origin": origin,
                                         "Access-Control-Request-Method": method,
                                         "Access-Control-Request-Headers": headers})


def register(client, origin: str | None = None):
    return client.post("/oauth/register/", data=json.dumps({
        "client_name": "Browser client", "redirect_uris": [CALLBACK],
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"]}),
        content_type="application/json", headers={"Origin": origin} if origin else {})


def form(client, path: str, fields: dict[str, str], origin: str):
    return client.post(path, data=urllib.parse.urlencode(fields), content_type=FORM,
                       headers={"Origin": origin})


def no_cors(answer: Any) -> bool:
    return not any(name.lower().startswith("access-control-") for name in answer.headers)


@pytest.mark.parametrize("path", METADATA)
@pytest.mark.parametrize("origin", [LISTED, UNLISTED])
def test_the_metadata_is_readable_from_any_origin_with_its_preflight_answered(
        client, path, origin):
    # The TypeScript SDK sends MCP-Protocol-Version on discovery: a preflight.
    answer = preflight(client, path, origin, "GET", "mcp-protocol-version")
    assert answer.status_code == 204
    assert answer["Access-Control-Allow-Origin"] == "*"
    assert answer["Access-Control-Allow-Methods"] == "GET"
    assert "MCP-Protocol-Version" in answer["Access-Control-Allow-Headers"]
    document = client.get(path, headers={"Origin": origin, "MCP-Protocol-Version": "2025-11-25"})
    assert document.status_code == 200 and document.json()
    assert document["Access-Control-Allow-Origin"] == "*"
    for reply in (answer, document):  # "*" and credentials never go together
        assert "Access-Control-Allow-Credentials" not in reply.headers


@pytest.mark.parametrize("path", ENDPOINTS)
def test_a_listed_origins_preflight_is_answered_naming_it(client, path):
    answer = preflight(client, path, LISTED, headers="authorization, content-type")
    assert answer.status_code == 204
    assert answer["Access-Control-Allow-Origin"] == LISTED
    assert answer["Access-Control-Allow-Methods"] == "POST"
    allowed = answer["Access-Control-Allow-Headers"].lower()
    assert "content-type" in allowed and "authorization" in allowed
    assert "Origin" in answer["Vary"]
    assert "Access-Control-Allow-Credentials" not in answer.headers


@pytest.mark.parametrize("path", ENDPOINTS)
def test_an_unlisted_origin_gets_no_cors_header_from_the_endpoints(client, path):
    answer = preflight(client, path, UNLISTED)
    assert answer.status_code == 403 and answer.json()["code"] == "forbidden"
    assert no_cors(answer) and "Origin" in answer["Vary"]
    # A request sent anyway is answered as before, with nothing that lets the
    # page read it.
    sent = form(client, path, {"token": "x", "grant_type": "authorization_code"}, UNLISTED)
    assert sent.status_code in (400, 401, 415) and no_cors(sent)
    assert "Origin" in sent["Vary"]


def test_a_listed_origin_registers_exchanges_refreshes_and_revokes(client):
    issue_agent_token("worker")
    registered = register(client, LISTED)
    assert registered.status_code == 201
    assert registered["Access-Control-Allow-Origin"] == LISTED
    assert "Retry-After" in registered["Access-Control-Expose-Headers"]
    client_id = registered.json()["client_id"]
    operator(client)
    verifier, challenge = pkce()
    code = code_from(consent(client, client_id, challenge))
    exchange = {"grant_type": "authorization_code", "code": code, "redirect_uri": CALLBACK,
                "client_id": client_id, "code_verifier": verifier}
    tokens = form(client, "/oauth/token/", exchange, LISTED)
    assert tokens.status_code == 200, tokens.content
    assert tokens["Access-Control-Allow-Origin"] == LISTED and "Origin" in tokens["Vary"]
    # An error is readable too: the page can tell its user why.
    replay = form(client, "/oauth/token/", exchange, LISTED)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert replay["Access-Control-Allow-Origin"] == LISTED
    verifier, challenge = pkce()
    code = code_from(consent(client, client_id, challenge))
    tokens = form(client, "/oauth/token/", {**exchange, "code": code, "code_verifier": verifier},
                  LISTED).json()
    renewed = form(client, "/oauth/token/", {"grant_type": "refresh_token",
                                              "refresh_token": tokens["refresh_token"],
                                              "client_id": client_id}, LISTED)
    assert renewed.status_code == 200 and renewed["Access-Control-Allow-Origin"] == LISTED
    revoked = form(client, "/oauth/revoke/", {"token": renewed.json()["access_token"],
                                              "client_id": client_id}, LISTED)
    assert revoked.status_code == 200 and revoked["Access-Control-Allow-Origin"] == LISTED
    for answer in (registered, renewed, revoked):
        assert "Access-Control-Allow-Credentials" not in answer.headers


def test_the_registration_is_managed_from_a_listed_origin_only(client):
    registered = register(client).json()
    path = f"/oauth/register/{registered['client_id']}/"
    answer = preflight(client, path, LISTED, "PUT", "authorization, content-type")
    assert answer.status_code == 204 and answer["Access-Control-Allow-Origin"] == LISTED
    assert answer["Access-Control-Allow-Methods"] == "GET, PUT, DELETE"
    bearer = {"Authorization": f"Bearer {registered['registration_access_token']}"}
    read = client.get(path, headers={**bearer, "Origin": LISTED})
    assert read.status_code == 200 and read["Access-Control-Allow-Origin"] == LISTED
    assert preflight(client, path, UNLISTED, "PUT").status_code == 403
    assert no_cors(client.get(path, headers={**bearer, "Origin": UNLISTED}))


def test_the_origins_are_the_ones_mcp_accepts(client, settings):
    # The site's own Origin and CSRF_TRUSTED_ORIGINS, as at /mcp.
    settings.CSRF_TRUSTED_ORIGINS = ["https://admin.example"]
    for origin in ("http://testserver", "https://admin.example"):
        answer = preflight(client, "/oauth/token/", origin)
        assert answer.status_code == 204 and answer["Access-Control-Allow-Origin"] == origin
    settings.WAKELEDGER_MCP_ALLOWED_ORIGINS = []
    assert preflight(client, "/oauth/token/", LISTED).status_code == 403
    # An opaque Origin (a sandboxed frame, a file) is never listed.
    assert no_cors(preflight(client, "/oauth/token/", "null"))


# Origins a browser or a script might send: the listed one in other spellings,
# near misses (another scheme, port, a suffix), and anything printable.
ORIGINS = st.one_of(
    st.sampled_from([LISTED, LISTED.upper(), f" {LISTED} ", f"{LISTED}/", f"{LISTED}:443",
                     "http://app.example", "https://app.example.evil", "null", "",
                     "http://testserver", UNLISTED]),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e), max_size=40))


@hsettings(max_examples=80, deadline=None,
           suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(origin=ORIGINS, path=st.sampled_from(ENDPOINTS),
       preflighted=st.booleans())
def test_an_endpoint_names_an_origin_exactly_when_mcp_would_accept_it(client, origin, path,
                                                                      preflighted):
    accepted = guard.origin_allowed(RequestFactory().get("/", headers={"Origin": origin}))
    if preflighted:
        answer = preflight(client, path, origin)
        assert answer.status_code == (204 if accepted else 403)
    else:
        answer = form(client, path, {"token": "x"}, origin)
        assert answer.status_code < 500
    if accepted:
        assert answer["Access-Control-Allow-Origin"] == origin.strip() != "*"
    else:
        assert no_cors(answer)
    assert "Access-Control-Allow-Credentials" not in answer.headers
    assert "Origin" in answer["Vary"]


def test_the_authorization_page_answers_no_cors(client):
    # A page the person navigates to, never fetched: not even a listed Origin
    # may read it (it carries the session's consent form).
    assert no_cors(preflight(client, "/oauth/authorize/", LISTED, "GET"))
    operator(client)
    registered = register(client).json()
    _, challenge = pkce()
    page = client.get("/oauth/authorize/?" + urllib.parse.urlencode({
        "response_type": "code", "client_id": registered["client_id"], "redirect_uri": CALLBACK,
        "code_challenge": challenge, "code_challenge_method": "S256", "scope": "mcp"}),
        headers={"Origin": LISTED})
    assert page.status_code == 200 and no_cors(page)

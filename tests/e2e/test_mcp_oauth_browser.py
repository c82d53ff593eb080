"""The OAuth consent in a real Chromium when the request is wrong: an error
found once the person has signed in is shown to them, and the way back
carries it to the connector (the sign-in form's CSP stops a redirect)."""

import json
import os
import shutil
import urllib.parse
import urllib.request

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from tests.helpers import issue_agent_token

CHROMIUM = os.environ.get("WAKELEDGER_CHROMIUM", "/usr/bin/chromium")
PASSWORD = "oauth-browser-password"
CALLBACK = "https://connector.example/callback"

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def register(base: str) -> str:
    request = urllib.request.Request(f"{base}/oauth/register/", method="POST", data=json.dumps({  # noqa: S310
        "client_name": "Browser connector", "redirect_uris": [CALLBACK],
        "token_endpoint_auth_method": "none"}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
        return json.loads(answer.read())["client_id"]


@pytest.fixture(autouse=True)
def chromium_here():
    if connection.vendor != "sqlite":
        pytest.skip("the browser tests run once, in the SQLite half of the suite")
    if not shutil.which(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (make test installs Debian's chromium)")


def test_an_error_after_sign_in_is_shown_and_carried_back_to_the_connector(live_server):
    from playwright.sync_api import sync_playwright

    get_user_model().objects.create_superuser("person", password=PASSWORD)
    issue_agent_token("worker")
    client_id = register(live_server.url)
    query = {"response_type": "code", "client_id": client_id, "redirect_uri": CALLBACK,
             "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
             "code_challenge_method": "S256", "state": "st-9", "scope": "mcp nonsense"}
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    reached: list[str] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                 args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page()
            page.route(f"{CALLBACK}*", lambda route: (
                reached.append(route.request.url),
                route.fulfill(status=200, body="back", content_type="text/plain")))
            # An unknown scope, found only after the sign-in.
            page.goto(f"{live_server.url}/oauth/authorize/?{urllib.parse.urlencode(query)}")
            page.fill("#id_username", "person")
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")
            page.wait_for_selector("#oauth-error", timeout=10_000)
            assert "invalid_scope" in page.inner_text("#content-main")
            assert "Django administration" not in page.content()
            page.click("#return-to-client")
            page.wait_for_function("() => document.body.innerText === 'back'")
            told = urllib.parse.parse_qs(urllib.parse.urlsplit(reached[-1]).query)
            assert told["error"] == ["invalid_scope"] and told["state"] == ["st-9"]
            assert told["iss"] == [live_server.url]  # RFC 9207, as on success
            # PKCE "plain": the same, where it used to be a bare text answer.
            plain = {**query, "scope": "mcp", "code_challenge_method": "plain"}
            page.goto(f"{live_server.url}/oauth/authorize/?{urllib.parse.urlencode(plain)}")
            assert "S256" in page.inner_text("#oauth-error ~ p")
            page.click("#return-to-client")
            page.wait_for_function("() => document.body.innerText === 'back'")
            told = urllib.parse.parse_qs(urllib.parse.urlsplit(reached[-1]).query)
            assert told["error"] == ["invalid_request"]
            browser.close()
    finally:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


def test_the_sdk_client_connects_by_its_metadata_document(live_server, settings, tmp_path,
                                                          monkeypatch):
    """The MCP SDK's own OAuth client, given a Client ID Metadata Document
    URL, uses it (the server advertises the support) instead of
    registering: the document is fetched over HTTPS, the person consents in
    Chromium, and the connector calls a tool."""
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
    from playwright.async_api import async_playwright

    from ledger.access.models import OAuthAudit
    from tests.e2e.test_mcp_http import MemoryStorage
    from tests.oauth_documents import Documents, serve_documents

    get_user_model().objects.create_superuser("person", password=PASSWORD)
    issue_agent_token("documented-agent")
    settings.WAKELEDGER_OAUTH_CIMD_PRIVATE_NETWORKS = ["127.0.0.0/8", "::1/128"]
    callback = "http://127.0.0.1:9/callback"
    url = f"{live_server.url}/mcp"
    seen: dict[str, object] = {}

    async def scenario(document_url: str) -> None:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                       args=["--no-sandbox", "--disable-gpu"])
            page = await browser.new_page()
            codes: list[str] = []

            async def answered(route) -> None:
                codes.append(route.request.url)
                await route.fulfill(status=200, body="done", content_type="text/plain")

            await page.route(f"{callback}*", answered)

            async def consent(authorize_url: str) -> None:
                seen["client_id"] = urllib.parse.parse_qs(
                    urllib.parse.urlsplit(authorize_url).query)["client_id"][0]
                await page.goto(authorize_url)
                await page.fill("#id_username", "person")
                await page.fill("#id_password", PASSWORD)
                await page.click("input[type=submit]")
                await page.wait_for_selector("#authorizationForm")
                seen["page"] = await page.content()
                await page.select_option("#id_agent", "documented-agent")
                await page.click("input[name=allow]")
                await page.wait_for_function("() => document.body.innerText === 'done'")

            async def code() -> AuthorizationCodeResult:
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(codes[-1]).query)
                return AuthorizationCodeResult(code=query["code"][0], state=query["state"][0],
                                               iss=query["iss"][0])

            provider = OAuthClientProvider(
                url, OAuthClientMetadata(client_name="SDK by document", redirect_uris=[callback],
                                         token_endpoint_auth_method="none"),
                MemoryStorage(), redirect_handler=consent, callback_handler=code,
                client_metadata_url=document_url)
            http = httpx2.AsyncClient(auth=provider, timeout=30)
            async with Client(streamable_http_client(url, http_client=http)) as client:
                seen["tools"] = len((await client.list_tools()).tools)
            await browser.close()

    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with serve_documents(tmp_path, monkeypatch) as base:
            document_url = f"{base}/sdk-client.json"
            Documents.served["/sdk-client.json"] = json.dumps({
                "client_id": document_url, "client_name": "SDK by document",
                "redirect_uris": [callback], "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"]}).encode()
            anyio.run(scenario, document_url)
            assert Documents.hits == ["/sdk-client.json"]  # fetched once, then kept
    finally:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    assert seen["client_id"] == document_url and seen["tools"]
    assert "SDK by document" in str(seen["page"]) and document_url in str(seen["page"])
    assert list(OAuthAudit.objects.order_by("id").values_list("kind", "by")) == [
        ("registered", "metadata document"), ("granted", "person")]


# A browser-based MCP client's page: discovery (the TypeScript SDK sends
# MCP-Protocol-Version there, so each document needs a preflight), then a
# JSON registration (a preflight too). Each step says what the page could read.
DISCOVER_AND_REGISTER = """async ({base, callback}) => {
    const version = {"MCP-Protocol-Version": "2025-11-25"};
    const steps = [];
    try {
        const resource = await (await fetch(
            base + "/.well-known/oauth-protected-resource/mcp", {headers: version})).json();
        steps.push("resource");
        const server = await (await fetch(resource.authorization_servers[0] +
            "/.well-known/oauth-authorization-server", {headers: version})).json();
        steps.push("server");
        const answer = await fetch(server.registration_endpoint, {method: "POST",
            headers: {...version, "Content-Type": "application/json"},
            body: JSON.stringify({client_name: "Page client", redirect_uris: [callback],
                                  token_endpoint_auth_method: "none"})});
        steps.push("registered");
        return {steps, server, status: answer.status, client: await answer.json()};
    } catch (error) {
        return {steps, blocked: String(error)};
    }
}"""

# The token endpoint as the SDKs call it: a form, Accept: application/json.
POST_FORM = """async ({url, fields, credentials}) => {
    try {
        const answer = await fetch(url, {method: "POST", body: new URLSearchParams(fields),
                                         headers: {"Accept": "application/json"},
                                         credentials: credentials || "same-origin"});
        return {status: answer.status, body: await answer.text()};
    } catch (error) {
        return {blocked: String(error)};
    }
}"""


def test_a_page_from_a_listed_origin_registers_and_exchanges_others_cannot(live_server,
                                                                          settings):
    """Chromium enforces CORS on the OAuth side: a page at a listed Origin
    discovers, registers, exchanges the code the person granted, and revokes;
    a page at another Origin reads the public metadata but nothing else."""
    import base64
    import hashlib
    import http.server
    import secrets
    import threading

    from oauth2_provider.models import get_application_model
    from playwright.sync_api import sync_playwright

    get_user_model().objects.create_superuser("person", password=PASSWORD)
    issue_agent_token("page-agent")
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), type("Page", (
        http.server.BaseHTTPRequestHandler,), {
            "do_GET": lambda self: (self.send_response(200), self.send_header(
                "Content-Type", "text/html"), self.end_headers(), self.wfile.write(
                b"<!doctype html><title>client</title>")),
            "log_message": lambda self, *args: None})) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    listed, unlisted = (f"http://127.0.0.1:{server.server_address[1]}" for server in servers)
    # The ledger at localhost: another site than the pages' 127.0.0.1.
    base = live_server.url.replace("127.0.0.1", "localhost")
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "localhost"]
    settings.WAKELEDGER_MCP_ALLOWED_ORIGINS = [listed]
    callback = "http://127.0.0.1:9/callback"  # never reached: the browser's route answers
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(
        hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # playwright's loop in this thread
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                 args=["--no-sandbox", "--disable-gpu"])
            client_page = browser.new_page()
            client_page.goto(f"{listed}/")
            found = client_page.evaluate(DISCOVER_AND_REGISTER,
                                         {"base": base, "callback": callback})
            assert found.get("status") == 201, found
            client_id = found["client"]["client_id"]
            # The person consents in their own tab, at the ledger.
            person = browser.new_page()
            reached: list[str] = []
            person.route(f"{callback}*", lambda route: (
                reached.append(route.request.url),
                route.fulfill(status=200, body="done", content_type="text/plain")))
            person.goto(f"{base}/oauth/authorize/?" + urllib.parse.urlencode({
                "response_type": "code", "client_id": client_id, "redirect_uri": callback,
                "code_challenge": challenge, "code_challenge_method": "S256",
                "state": "st-page", "scope": "mcp"}))
            person.fill("#id_username", "person")
            person.fill("#id_password", PASSWORD)
            person.click("input[type=submit]")
            person.wait_for_selector("#authorizationForm")
            person.select_option("#id_agent", "page-agent")
            person.click("input[name=allow]")
            person.wait_for_function("() => document.body.innerText === 'done'")
            code = urllib.parse.parse_qs(urllib.parse.urlsplit(reached[-1]).query)["code"][0]
            exchange = {"grant_type": "authorization_code", "code": code,
                        "redirect_uri": callback, "client_id": client_id,
                        "code_verifier": verifier}
            tokens = client_page.evaluate(POST_FORM, {"url": found["server"]["token_endpoint"],
                                                      "fields": exchange})
            assert tokens.get("status") == 200, tokens
            access = json.loads(tokens["body"])["access_token"]
            revoked = client_page.evaluate(POST_FORM, {
                "url": found["server"]["revocation_endpoint"],
                "fields": {"token": access, "client_id": client_id}})
            assert revoked.get("status") == 200, revoked
            # Never with cookies: the person's session at the ledger stays out of reach.
            cookies = client_page.evaluate(POST_FORM, {
                "url": found["server"]["token_endpoint"], "credentials": "include",
                "fields": {**exchange, "code": "guessed"}})
            assert "Failed to fetch" in cookies.get("blocked", ""), cookies
            # Another Origin: the public metadata, then nothing.
            other = browser.new_page()
            other.goto(f"{unlisted}/")
            refused = other.evaluate(DISCOVER_AND_REGISTER, {"base": base, "callback": callback})
            assert refused["steps"] == ["resource", "server"], refused
            assert "Failed to fetch" in refused["blocked"], refused
            # A form needs no preflight: it is sent, answered, and unreadable.
            guess = other.evaluate(POST_FORM, {"url": found["server"]["token_endpoint"],
                                               "fields": {**exchange, "code": "guessed"}})
            assert "Failed to fetch" in guess.get("blocked", ""), guess
            browser.close()
    finally:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        for server in servers:
            server.shutdown()
    # The unlisted page's registration never got past its preflight.
    assert list(get_application_model().objects.values_list("name", flat=True)) == [
        "Page client"]

"""/mcp: MCP over streamable HTTP served by the product (api/mcp/), driven by
the MCP SDK's own streamable HTTP client against a live server."""

import json
import os
import shutil
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import httpx2
import pytest
from django.contrib.auth import get_user_model
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from api.mcp.tasks import advertised
from wakeledger_agent.mcp_calls import REDACTED
from wakeledger_agent.mcp_tools import SPECS, build_tools

WAITING = {"not_due", "worker_busy_noop"}


class ShiftedClock:
    """The wall clock, moved on when the test says: the ledger's one clock
    (ledger.eventstore.clock), which the in-process live server reads."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def advance(self, **delta: float) -> None:
        self.offset += timedelta(**delta)


CLOCK = ShiftedClock()


@pytest.fixture(autouse=True)
def shifted_clock():
    from ledger.eventstore import clock

    CLOCK.offset = timedelta()
    with clock.use(CLOCK):
        yield CLOCK


@pytest.fixture
def tokens(transactional_db):
    from tests.helpers import issue_agent_token

    return issue_agent_token("http-agent"), issue_agent_token("other-agent")


def post(url: str, body: Any, headers: dict[str, str] | None = None
         ) -> tuple[int, dict[str, str], Any]:
    """One raw POST: status, headers, JSON body (or None)."""
    data = json.dumps(body).encode() if not isinstance(body, bytes) else body
    request = urllib.request.Request(url, data=data, method="POST", headers={  # noqa: S310
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            content = answer.read()
            return answer.status, dict(answer.headers), json.loads(content) if content else None
    except urllib.error.HTTPError as error:
        content = error.read()
        return error.code, dict(error.headers), json.loads(content) if content else None


def connect(url: str, token: str, mode: str = "auto") -> Client:
    """The SDK's client: "auto" (its default) probes server/discover and falls
    back to initialize; "legacy" shakes hands (2025); a version pins it."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    return Client(streamable_http_client(url, http_client=http), mode=mode)


class Session:
    def __init__(self, client: Client):
        self.client = client
        self.texts: list[str] = []

    async def call(self, name: str, **arguments: Any) -> Any:
        result = await self.client.call_tool(name, arguments)
        self.texts += [block.text for block in result.content]
        return result

    async def ok(self, name: str, **arguments: Any) -> dict[str, Any]:
        result = await self.call(name, **arguments)
        assert not result.is_error, (name, result.content)
        assert json.loads(result.content[0].text) == result.structured_content
        return result.structured_content


async def lnwjud(session: Session, goal_key: str) -> str:
    """The lnwjud protocol over /mcp: run, checkpoint, prepare the one
    watchdog, its receipt, release; the scheduled task's claim; the verified
    finish and the cancellation receipt. Returns the goal's id."""
    started = await session.ok(
        "run_goal", goal_key=goal_key, workspace=f"/srv/{goal_key}",
        objective="Exercise /mcp", done_criteria=["finished"], next_actions=["finish"],
        policy={"scheduler": "host", "cadence_minutes": 1})
    goal_id = started["goal"]["id"]
    assert started["acquired"] is True and started["lease"]["token"] == REDACTED
    assert (await session.ok("checkpoint_goal", goal_id=goal_id, current_step="half",
                             progress_pct=40))["checkpoint"]["progress_pct"] == 40
    prepared = await session.ok("prepare_scheduled_continuation", goal_id=goal_id,
                                tzid="Asia/Bangkok")
    schedule = prepared["host_schedule"]
    receipt = await session.ok("record_watchdog_receipt", goal_id=goal_id, status="created",
                               host_ref="chatgpt-task-1", due_at=schedule["first_due_at"],
                               runs_on="unverified")
    assert receipt["watchdog"]["status"] == "live"
    await session.ok("checkpoint_goal", goal_id=goal_id, current_step="turn ends",
                     progress_pct=50, release_lease=True)
    fenced = await session.call("heartbeat", goal_id=goal_id)
    assert fenced.is_error and fenced.structured_content["code"] == "lease_required"
    # The scheduled task fires: claim first, work only once it is ours. An
    # early firing is not_due; the ledger's clock then moves on to the slot
    # (the live server runs in this process) instead of the test waiting.
    claims = []
    for n in range(1, 4):
        claim = await session.ok("claim_scheduled_continuation", goal_id=goal_id,
                                 occurrence_id=f"tick-{n}")
        claims.append(claim["outcome"])
        if claim["outcome"] == "recurring_acquired":
            break
        assert claim["outcome"] in WAITING, claim
        CLOCK.advance(seconds=claim["retry_after_seconds"] + 1)
    assert claims[-1] == "recurring_acquired", claims
    assert claim["lease"]["token"] == REDACTED
    await session.ok("checkpoint_goal", goal_id=goal_id, current_step="done", progress_pct=100,
                     completed=["finish"])
    await session.ok("cancel_scheduled_continuation", goal_id=goal_id)
    cancelled = await session.ok("record_watchdog_receipt", goal_id=goal_id, status="cancelled")
    assert cancelled["watchdog"]["status"] in ("cancelled", "none"), cancelled
    finished = await session.ok("finish_goal", goal_id=goal_id, status="completed",
                                summary="all done", evidence=[
                                    {"criterion": "finished", "evidence": "checkpoint 100 %"}])
    assert finished["completion_state"] == "completed", finished
    assert (await session.ok("get_goal", goal_id=goal_id))["status"] == "done"
    assert not any("wll_" in text for text in session.texts)
    return goal_id


@pytest.mark.slow  # a live server and the SDK's client
@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")),
                    reason="runs once, in the SQLite half (tests/test_mcp_http_guard.py runs "
                           "/mcp's database paths in both)")
@pytest.mark.parametrize(("mode", "era"), [("auto", "2026-07-28"), ("2026-07-28", "2026-07-28"),
                                           ("legacy", "2025-11-25")])
def test_the_sdk_client_runs_a_goal_over_mcp(live_server, tokens, mode, era):
    mine, other = tokens
    url = f"{live_server.url}/mcp"
    seen: dict[str, Any] = {}

    async def scenario() -> None:
        async with connect(url, mine, mode) as client:
            assert client.protocol_version == era
            if mode != era:  # a pinned client skips discovery, and its instructions
                assert "claim_scheduled_continuation" in client.instructions
            listed = (await client.list_tools()).tools
            seen["tools"] = [tool.model_dump(mode="json", by_alias=True) for tool in listed]
            session = Session(client)
            seen["goal"] = await lnwjud(session, "http-1")
            bad = await session.call("checkpoint_goal", goal_id=seen["goal"],
                                     current_step="x", progress_pct=150)
            assert bad.is_error and bad.structured_content["code"] == "validation_error"
        # Another agent sees nothing of it.
        async with connect(url, other, mode) as client:
            hidden = await client.call_tool("get_goal", {"goal_id": seen["goal"]})
            assert hidden.is_error and hidden.structured_content["code"] == "not_found"

    anyio.run(scenario)
    # The same tool table as stdio's: built from the API's OpenAPI document.
    with urllib.request.urlopen(f"{live_server.url}/api/v1/schema?format=json",  # noqa: S310
                                timeout=10) as answer:
        openapi = json.loads(answer.read())
    # The tools that can run as a task say so (api/mcp/tasks.py), where the
    # era's Tool has the field: 2026-07-28 hosts learn it from the tasks
    # extension instead.
    expected = [(advertised(tool) if era != "2026-07-28" else tool)
                .model_dump(mode="json", by_alias=True) for tool in build_tools(openapi)]
    assert seen["tools"] == expected and {t["name"] for t in expected} == set(SPECS)


def modern_post(http: httpx2.Client, url: str, method: str, params: dict[str, Any] | None = None,
                ident: int = 1, **headers: str) -> httpx2.Response:
    """One raw 2026-07-28 request: the envelope in _meta, repeated by the
    routing headers (a test overrides one to disagree)."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw-httpx", "version": "1"}}
    routing = {"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method}
    if method == "tools/call":
        routing["Mcp-Name"] = (params or {})["name"]
    return http.post(url, json={"jsonrpc": "2.0", "id": ident, "method": method,
                                "params": {**(params or {}), "_meta": meta}},
                     headers={**routing, **headers})


@pytest.mark.slow  # a live server
@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")),
                    reason="runs once, in the SQLite half (tests/api/test_mcp_eras.py runs "
                           "the eras' database paths in both)")
def test_a_raw_2026_exchange_over_http(live_server, tokens):
    url = f"{live_server.url}/mcp"
    with httpx2.Client(headers={"Authorization": f"Bearer {tokens[0]}",
                                "Accept": "application/json, text/event-stream"},
                       timeout=30) as http:
        found = modern_post(http, url, "server/discover")
        assert found.status_code == 200 and "mcp-session-id" not in found.headers
        assert found.json()["result"]["supportedVersions"] == ["2026-07-28"]
        started = modern_post(http, url, "tools/call", {"name": "run_goal", "arguments": {
            "goal_key": "raw-1", "workspace": "/srv/raw", "objective": "o",
            "done_criteria": ["d"]}}, ident=2).json()
        assert started["id"] == 2 and started["result"]["resultType"] == "complete"
        goal_id = started["result"]["structuredContent"]["goal"]["id"]
        finished = modern_post(http, url, "tools/call", {"name": "finish_goal", "arguments": {
            "goal_id": goal_id, "status": "completed", "summary": "done",
            "evidence": [{"criterion": "d", "evidence": "raw"}]}}, ident=3).json()["result"]
        assert finished["structuredContent"]["completion_state"] == "completed", finished
        mismatch = modern_post(http, url, "tools/call", {"name": "get_goal", "arguments": {
            "goal_id": goal_id}}, **{"Mcp-Name": "run_goal"})
        assert mismatch.status_code == 400 and mismatch.json()["error"]["code"] == -32020
        future = modern_post(http, url, "tools/list", **{"Mcp-Protocol-Version": "2099-01-01"})
        assert future.status_code == 400 and future.json()["error"]["code"] == -32022
        assert "2026-07-28" in future.json()["error"]["data"]["supported"]
        assert modern_post(http, url, "initialize").status_code == 404


# ---------------------------------------------------------------- OAuth: a hosted connector

CHROMIUM = os.environ.get("WAKELEDGER_CHROMIUM", "/usr/bin/chromium")
PASSWORD = "oauth-test-password"


class MemoryStorage:
    """The SDK client's token storage, kept for the test to look at."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@pytest.mark.slow  # a live server, the SDK's client and a real Chromium
@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")),
                    reason="the browser tests run once, in the SQLite half of the suite")
def test_a_connector_registers_is_authorized_in_chromium_and_runs_a_goal(
        live_server, tokens):
    if not shutil.which(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (make test installs Debian's chromium)")
    from playwright.async_api import async_playwright

    # The test body reaches the ORM from inside the event loop the clients need.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    get_user_model().objects.create_superuser("person", password=PASSWORD)
    from tests.helpers import issue_agent_token

    issue_agent_token("connector-agent")  # the identity the person will choose
    bearer_goal = {}
    url = f"{live_server.url}/mcp"
    callback = "http://127.0.0.1:9/callback"  # never reached: the browser's route answers
    storage = MemoryStorage()
    seen: dict[str, Any] = {"pages": []}

    async def scenario() -> None:
        async with connect(url, tokens[0]) as client:
            bearer_goal["id"] = (await client.call_tool("run_goal", {
                "goal_key": "bearer-1", "workspace": "/srv/b", "objective": "bearer's own",
                "done_criteria": ["x"]})).structured_content["goal"]["id"]
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                       args=["--no-sandbox", "--disable-gpu"])
            page = await browser.new_page()
            codes: list[str] = []

            async def answered(route: Any) -> None:
                codes.append(route.request.url)
                await route.fulfill(status=200, body="done", content_type="text/plain")

            await page.route(f"{callback}*", answered)

            async def consent(authorize_url: str) -> None:
                # The person: signs in to the admin, chooses the agent, authorizes.
                seen["authorize_url"] = authorize_url
                await page.goto(authorize_url)
                await page.fill("#id_username", "person")
                await page.fill("#id_password", PASSWORD)
                await page.click("input[type=submit]")
                await page.wait_for_selector("#authorizationForm")
                seen["pages"].append(await page.content())
                await page.select_option("#id_agent", "connector-agent")
                await page.click("input[name=allow]")
                await page.wait_for_function("() => document.body.innerText === 'done'")

            async def code() -> AuthorizationCodeResult:
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(codes[-1]).query)
                # RFC 9207: the redirect names its issuer; the SDK checks it.
                assert query["iss"] == [live_server.url]
                return AuthorizationCodeResult(code=query["code"][0],
                                               state=query.get("state", [None])[0],
                                               iss=query["iss"][0])

            provider = OAuthClientProvider(
                url, OAuthClientMetadata(client_name="Test connector", redirect_uris=[callback],
                                         token_endpoint_auth_method="none"),
                storage, redirect_handler=consent, callback_handler=code)
            http = httpx2.AsyncClient(auth=provider, timeout=30)
            async with Client(streamable_http_client(url, http_client=http)) as client:
                session = Session(client)
                seen["goal"] = await lnwjud(session, "oauth-1")
                # The connector is the agent it was authorized as: its own goals only.
                hidden = await session.call("get_goal", goal_id=bearer_goal["id"])
                assert hidden.is_error and hidden.structured_content["code"] == "not_found"
                first = storage.tokens
                # The access token's hour has passed: the SDK refreshes it by itself.
                provider.context.token_expiry_time = 1.0
                assert (await session.ok("get_goal", goal_id=seen["goal"]))["status"] == "done"
                assert storage.tokens.access_token != first.access_token
                assert storage.tokens.refresh_token != first.refresh_token
                seen["first"], seen["second"] = first, storage.tokens
            await browser.close()

    anyio.run(scenario)
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)

    # What the client discovered: PKCE S256, its registration, the resource.
    asked = urllib.parse.parse_qs(urllib.parse.urlsplit(seen["authorize_url"]).query)
    assert asked["code_challenge_method"] == ["S256"] and asked["resource"] == [url]
    assert "connector-agent" in seen["pages"][0] and "Test connector" in seen["pages"][0]
    first, second = seen["first"], seen["second"]
    init = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    # Nor does the bearer agent see the connector's goal.
    hidden = post(url, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "get_goal", "arguments": {"goal_id": seen["goal"]}}},
        {"Authorization": f"Bearer {tokens[0]}"})[2]["result"]
    assert hidden["isError"] and hidden["structuredContent"]["code"] == "not_found"
    # The refreshed-away access token is dead; the new one works.
    status, headers, _ = post(url, init, {"Authorization": f"Bearer {first.access_token}"})
    assert status == 401 and "resource_metadata=" in headers["WWW-Authenticate"]
    assert post(url, init, {"Authorization": f"Bearer {second.access_token}"})[0] == 200
    # Revocation (RFC 7009): the connector's access ends at once.
    client_id = storage.client.client_id
    status, _, _ = form_post(f"{live_server.url}/oauth/revoke/", {
        "token": second.refresh_token, "client_id": client_id})
    assert status == 200
    assert post(url, init, {"Authorization": f"Bearer {second.access_token}"})[0] == 401
    # A rotated-away refresh token cannot be used again.
    status, _, body = form_post(f"{live_server.url}/oauth/token/", {
        "grant_type": "refresh_token", "refresh_token": first.refresh_token,
        "client_id": client_id})
    assert status == 400 and body["error"] == "invalid_grant"
    # The auditor's record: the registration, the consent (who, as which
    # agent) and the revocation.
    from ledger.access.models import OAuthAudit

    trail = [(a.kind, a.agent, a.by, a.client_name)
             for a in OAuthAudit.objects.order_by("recorded_at", "id")]
    assert trail == [("registered", "", "dynamic registration from 127.0.0.1", "Test connector"),
                     ("granted", "connector-agent", "person", "Test connector"),
                     ("revoked", "connector-agent", "client", "Test connector")]
    # No token is stored in the clear.
    from oauth2_provider.models import AccessToken, RefreshToken

    assert not AccessToken.objects.exclude(token="").exists()
    assert not RefreshToken.objects.exclude(token="").exists()


FETCH = """async ({url, token, version}) => {
    const meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}};
    const headers = {"Content-Type": "application/json",
                     "Accept": "application/json, text/event-stream",
                     "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"};
    if (token) headers["Authorization"] = "Bearer " + token;
    try {
        const answer = await fetch(url, {method: "POST", headers, body: JSON.stringify(
            {jsonrpc: "2.0", id: 1, method: "tools/list", params: {_meta: meta}})});
        return {status: answer.status, challenge: answer.headers.get("WWW-Authenticate"),
                body: await answer.text()};
    } catch (error) {
        return {blocked: String(error)};
    }
}"""


@pytest.mark.slow  # a live server and a real Chromium
@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")),
                    reason="the browser tests run once, in the SQLite half of the suite")
def test_a_browser_page_from_a_listed_origin_calls_mcp_and_others_cannot(
        live_server, tokens, settings):
    """Chromium enforces CORS itself: the preflight, the exposed challenge,
    and a page from an Origin not listed kept from reading anything."""
    if not shutil.which(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (make test installs Debian's chromium)")
    import http.server
    import threading

    from playwright.sync_api import sync_playwright

    # The page's own origin: another port on the loopback address, so the
    # browser treats /mcp (at localhost) as another site.
    pages = http.server.ThreadingHTTPServer(("127.0.0.1", 0), type("Page", (
        http.server.BaseHTTPRequestHandler,), {
            "do_GET": lambda self: (self.send_response(200), self.send_header(
                "Content-Type", "text/html"), self.end_headers(), self.wfile.write(
                b"<!doctype html><title>client</title>")),
            "log_message": lambda self, *args: None}))
    threading.Thread(target=pages.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{pages.server_address[1]}"
    url = f"{live_server.url.replace('127.0.0.1', 'localhost')}/mcp"
    settings.WAKELEDGER_MCP_ALLOWED_ORIGINS = [origin]
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "localhost"]
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # playwright's loop in this thread
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                 args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page()
            page.goto(f"{origin}/")
            listed = page.evaluate(FETCH, {"url": url, "token": tokens[0]})
            challenged = page.evaluate(FETCH, {"url": url, "token": ""})
            settings.WAKELEDGER_MCP_ALLOWED_ORIGINS = []
            unlisted = page.evaluate(FETCH, {"url": url, "token": tokens[0]})
            browser.close()
    finally:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        pages.shutdown()
    assert listed.get("status") == 200, listed
    assert "get_goal" in {tool["name"] for tool in json.loads(listed["body"])["result"]["tools"]}
    assert challenged["status"] == 401 and "resource_metadata=" in challenged["challenge"]
    assert "blocked" in unlisted, unlisted  # the 403 carries no CORS header: unreadable


def form_post(url: str, fields: dict[str, str]) -> tuple[int, dict[str, str], Any]:
    return post(url, urllib.parse.urlencode(fields).encode(),
                {"Content-Type": "application/x-www-form-urlencoded"})

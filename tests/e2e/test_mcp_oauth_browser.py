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


def test_an_error_after_sign_in_is_shown_and_carried_back_to_the_connector(live_server):
    if connection.vendor != "sqlite":
        pytest.skip("the browser tests run once, in the SQLite half of the suite")
    if not shutil.which(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (make test installs Debian's chromium)")
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

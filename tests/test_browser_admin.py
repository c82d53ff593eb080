"""The admin in a real browser: Playwright driving the system Chromium
(/usr/bin/chromium, installed by `make test` from Debian's packages; never a
browser download of Playwright's own) against a live server.

Screenshots go to test-artifacts/ (git-ignored).
"""

import os
import shutil
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection

from ledger import store
from ledger.domain import GoalState
from ledger.domain.runs import ReportRun
from ledger.models import Event, Goal
from tests.factories import GoalFactory, proof_of

CHROMIUM = os.environ.get("WAKELEDGER_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
PASSWORD = "browser-test-password"

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture(scope="module")
def browser():
    if connection.vendor != "sqlite":
        pytest.skip("the browser tests run once, in the SQLite half of the suite")
    if not shutil.which(CHROMIUM):
        if os.environ.get("WAKELEDGER_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{CHROMIUM} is missing and WAKELEDGER_REQUIRE_BROWSER=1")
        pytest.skip(f"{CHROMIUM} is missing (make test installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    # Playwright's sync API keeps an event loop in this thread, which makes
    # Django refuse ORM calls from the test body; they are plain sync calls.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        yield chromium
        chromium.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


def user(username: str, role: str) -> None:
    account = get_user_model().objects.create_user(username, password=PASSWORD, is_staff=True)
    account.groups.add(Group.objects.get(name=role))


def login(browser, live_server, username: str):
    page = browser.new_page()
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")
    return page


def blocked_goal() -> Goal:
    goal = GoalFactory(goal_key="stuck-build", checkpoints=3)
    state = GoalState.from_dict(goal.state)
    store.execute(goal.pk, ReportRun(proof_of(state), "error", "unclassified"),
                      actor="agent-1")
    return Goal.objects.get(pk=goal.pk)


def test_an_auditor_browses_the_history(browser, live_server):
    user("audrey", "auditor")
    long = GoalFactory(goal_key="long-history", checkpoints=120)
    blocked_goal()
    page = login(browser, live_server, "audrey")
    page.click("[data-testid=dashboard-link]")
    assert page.locator("[data-testid=group]").count() == 1
    assert "Blocked: UNCLASSIFIED" in page.content()
    page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)

    page.goto(f"{live_server.url}/admin/ledger/goal/")
    assert page.locator("a.addlink").count() == 0
    assert page.locator("select[name=action]").count() == 0
    page.click("text=long-history")
    page.wait_for_url(f"**/admin/ledger/goal/{long.pk}/timeline/")
    assert page.locator("[data-testid=event]").count() == 50
    assert page.locator("[data-testid=chain]").inner_text() == "chain verified (this page)"
    assert page.locator("[data-testid=operator-actions]").count() == 0
    assert page.locator("[data-testid=chart]").count() == 1

    # Fold and unfold an event's raw JSON.
    first = page.locator("[data-testid=event]").first
    raw = first.locator("pre")
    assert not raw.is_visible()
    first.locator("summary").click()
    assert raw.is_visible() and '"progress_pct"' in raw.inner_text()
    first.locator("summary").click()
    assert not raw.is_visible()
    page.screenshot(path=str(ARTIFACTS / "timeline.png"), full_page=True)

    # Page through the long history, then back.
    newest = page.locator("[data-testid=event]").first.get_attribute("id")
    page.click("[data-testid=older] >> nth=0")
    assert page.locator("[data-testid=event]").first.get_attribute("id") == \
        f"seq-{long.version - 50}"
    page.click("[data-testid=older] >> nth=0")
    page.click("[data-testid=newer] >> nth=0")
    page.click("[data-testid=newer] >> nth=0")
    assert page.locator("[data-testid=event]").first.get_attribute("id") == newest

    # No add, change or delete anywhere for events either.
    page.goto(f"{live_server.url}/admin/ledger/event/")
    assert page.locator("a.addlink").count() == 0
    assert page.locator("select[name=action]").count() == 0
    page.close()


def test_an_operator_recovers_a_blocked_goal(browser, live_server):
    user("olga", "operator")
    goal = blocked_goal()
    page = login(browser, live_server, "olga")
    page.click("[data-testid=dashboard-link]")
    page.click("text=stuck-build")
    assert page.locator("[data-testid=reason]").inner_text() == "UNCLASSIFIED"
    page.click("[data-testid=operator-actions] >> text=Recover")
    page.fill("textarea[name=reason]", "the flaky runner was replaced")
    page.screenshot(path=str(ARTIFACTS / "recover-form.png"), full_page=True)
    page.click("[data-testid=submit]")
    page.wait_for_url(f"**/admin/ledger/goal/{goal.pk}/timeline/")
    assert page.locator("[data-testid=status]").inner_text() == "waiting"
    assert page.locator("[data-testid=reason]").count() == 0
    page.screenshot(path=str(ARTIFACTS / "recovered.png"), full_page=True)
    recovered = Event.objects.get(goal=goal, kind="goal.recovered")
    assert (recovered.actor, recovered.data["reason"]) == ("olga",
                                                           "the flaky runner was replaced")
    page.close()

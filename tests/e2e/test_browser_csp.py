"""The Content-Security-Policy in a real browser: Chromium reports every
inline script or style it refuses; the admin's pages (the timeline's chart,
icons and folded JSON included) and the API docs must cause none."""

import pytest

from tests.e2e.test_browser_admin import ARTIFACTS, browser, login, user  # noqa: F401
from tests.factories import GoalFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def watch_for_violations(page) -> list[str]:
    seen: list[str] = []
    page.on("console", lambda message: seen.append(message.text)
            if "Content Security Policy" in message.text else None)
    return seen


def test_the_admin_and_the_api_docs_run_under_the_policy(browser, live_server):  # noqa: F811
    user("audrey", "auditor")
    goal = GoalFactory(goal_key="csp-check", checkpoints=12)
    page = login(browser, live_server, "audrey")
    violations = watch_for_violations(page)

    page.goto(f"{live_server.url}/admin/")
    page.goto(f"{live_server.url}/admin/ledger/goal/dashboard/")
    page.goto(f"{live_server.url}/admin/ledger/goal/{goal.pk}/timeline/")
    assert page.locator("[data-testid=chart] polyline").count() == 1
    assert page.locator("[data-testid=chart]").is_visible()
    # The icons' colours are SVG fills, not style="" (which the policy refuses).
    icon = page.locator("[data-testid=event] .wl-icon rect").first
    assert icon.evaluate("e => getComputedStyle(e).fill") == "rgb(30, 142, 62)"
    assert page.locator(".wl-grid").evaluate("e => getComputedStyle(e).display") == "grid"
    first = page.locator("[data-testid=event]").first
    first.locator("summary").click()
    assert first.locator("pre").is_visible()
    page.screenshot(path=str(ARTIFACTS / "timeline-csp.png"), full_page=True)

    docs = browser.new_page()
    violations += watch_for_violations(docs)
    docs.goto(f"{live_server.url}/api/v1/docs")
    docs.wait_for_selector(".swagger-ui .info .title", timeout=15000)
    assert "Wake Ledger API" in docs.locator(".swagger-ui .info .title").inner_text()
    docs.close()
    page.close()
    assert violations == []


def test_an_injected_inline_script_is_refused_by_the_browser(browser, live_server):  # noqa: F811
    """The policy is not just sent: Chromium enforces it on our pages."""
    user("audrey", "auditor")
    page = login(browser, live_server, "audrey")
    violations = watch_for_violations(page)
    page.goto(f"{live_server.url}/admin/")
    page.evaluate("""() => {
        const s = document.createElement('script');
        s.textContent = 'window.injected = true';
        document.body.appendChild(s);
    }""")
    assert page.evaluate("() => window.injected === undefined")
    assert any("script-src" in text for text in violations), violations
    page.close()

"""The admin in a real browser: Playwright driving the system Chromium
(/usr/bin/chromium, installed by `make test` from Debian's packages; never a
browser download of Playwright's own) against a live server.

Screenshots go to test-artifacts/ (git-ignored).
"""

import os
import re
import shutil
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.utils import timezone
from django_q.models import Schedule

from ledger.admin.events import EventAdmin
from ledger.domain import GoalState
from ledger.domain.runs import ReportRun, Stop
from ledger.domain.vocabulary import ACTIVE_STATUSES
from ledger.eventstore import store
from ledger.models import Event, Goal
from ledger.operators import demo, doctor, passes, timeline
from tests.factories import GoalFactory, proof_of

CHROMIUM = os.environ.get("WAKELEDGER_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
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


def user(username: str, role: str | None) -> None:
    if role is None:
        get_user_model().objects.create_superuser(username, password=PASSWORD)
        return
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


# Emoji and dingbats (the old icons were 🔑 ⏰ 📁 🧾 ⚙ ✋ ✔ ⚠): none may reach
# the timeline, since Debian's Chromium has no font to draw them.
PICTOGRAPHS = re.compile("[\u2600-\u27bf\U0001f000-\U0001faff]")


def test_event_icons_are_svg_and_the_chart_has_axes_and_a_legend(browser, live_server):
    user("audrey", "auditor")
    made = {m.goal_key: m for m in demo.create()}
    page = login(browser, live_server, "audrey")
    # A story with checkpoints, a rate limit, its wake and leases; completed.
    goal = made["checkout-flaky-test"]
    page.goto(f"{live_server.url}/admin/ledger/goal/{goal.goal_id}/timeline/")
    rows = page.locator("[data-testid=event]")
    families = set()
    for i in range(rows.count()):
        row = rows.nth(i)
        svg = row.locator("svg.wl-icon")
        assert svg.count() == 1, row.inner_text()
        box = svg.bounding_box()
        assert box and box["width"] >= 24 and box["height"] >= 24  # drawn, not collapsed
        assert svg.locator("path, polyline, circle, rect, line").count() >= 1
        kind = row.locator(".wl-kind").inner_text()
        assert svg.locator("title").text_content() == f"{timeline.style(kind)[0]} event"
        assert row.locator("> div").first.evaluate(  # the icon cell holds no text
            "c => [...c.childNodes].every(n => n.nodeName === 'svg' || !n.textContent.trim())")
        families.add(svg.get_attribute("data-family"))
    assert {"lease", "wake", "workspace", "checkpoint", "goal"} <= families
    assert not PICTOGRAPHS.search(page.locator("#wl-timeline").inner_text())
    page.locator("[data-testid=event]").first.screenshot(path=str(ARTIFACTS / "event-row.png"))

    chart = page.locator("[data-testid=chart]")
    y_labels = chart.locator("[data-testid=y-axis] text").all_text_contents()
    assert y_labels == ["0 %", "25 %", "50 %", "75 %", "100 %"]
    x_labels = chart.locator("[data-testid=x-tick]").all_text_contents()
    assert len(x_labels) >= 3 and all(re.fullmatch(r"\d\d:\d\d", t) for t in x_labels)
    legend = page.locator("[data-testid=chart-legend]").inner_text()
    for label in ("progress", "wake claimed", "paused (rate limit)", "UTC"):
        assert label in legend
    kinds = [m.text_content() for m in chart.locator("[data-testid=marker] title").all()]
    assert any("wake.claimed" in k for k in kinds) and any("goal.paused" in k for k in kinds)
    # A finished goal's chart spans its whole life: the progress line runs
    # from the start of the plot to its end, not a sliver at the left edge.
    plot = chart.locator("[data-testid=x-axis] line").first.bounding_box()
    line = chart.locator("[data-testid=progress-line]").bounding_box()
    assert line["x"] - plot["x"] < 2 and line["width"] > 0.98 * plot["width"]
    chart.screenshot(path=str(ARTIFACTS / "chart.png"))
    page.screenshot(path=str(ARTIFACTS / "timeline-demo.png"), full_page=True)

    # A short goal, just started: minutes of life fill the plot too.
    short = GoalFactory(goal_key="short-one", checkpoints=3)
    page.goto(f"{live_server.url}/admin/ledger/goal/{short.pk}/timeline/")
    chart = page.locator("[data-testid=chart]")
    assert chart.locator("[data-testid=x-tick]").count() >= 1
    assert all(re.fullmatch(r"\d\d:\d\d:\d\d(\.\d)?", t)
               for t in chart.locator("[data-testid=x-tick]").all_text_contents())
    chart.screenshot(path=str(ARTIFACTS / "chart-short.png"))
    page.close()


def changelist_rows(page) -> int:
    return page.locator("#result_list tbody tr").count()


def test_changelists_count_honestly_and_link_only_to_pages_with_rows(browser, live_server,
                                                                      monkeypatch):
    user("audrey", "auditor")
    goals = [GoalFactory(checkpoints=40) for _ in range(3)]  # 3 goals, 123 events
    page = login(browser, live_server, "audrey")
    page.goto(f"{live_server.url}/admin/ledger/goal/")
    assert page.locator("[data-testid=result-count]").inner_text() == "3 goals"
    assert changelist_rows(page) == 3
    assert page.locator(".paginator a").count() == 0
    assert "10000000" not in page.content() and "10,000,000" not in page.content()

    events = Event.objects.filter(goal__in=goals).count()
    page.goto(f"{live_server.url}/admin/ledger/event/")
    assert page.locator("[data-testid=result-count]").inner_text() == f"{events} events"
    links = page.locator(".paginator a:not(.showall)").evaluate_all(
        "els => els.map(e => e.href)")
    assert len(links) == -(-events // 50) - 1  # the other pages, each linked once
    for link in links:
        page.goto(link)
        assert changelist_rows(page) > 0, link
    page.screenshot(path=str(ARTIFACTS / "events-changelist.png"), full_page=True)

    # Past the counting limit: "more than N", and links only as far as rows
    # are known to exist.
    monkeypatch.setattr(EventAdmin, "count_limit", 60)
    monkeypatch.setattr(EventAdmin, "list_per_page", 10)
    monkeypatch.setattr(EventAdmin, "list_max_show_all", 20)
    page.goto(f"{live_server.url}/admin/ledger/event/")
    assert page.locator("[data-testid=result-count]").inner_text() == "more than 60 events"
    assert page.locator(".paginator .showall").count() == 0  # "all" is not known to be small
    pages = page.locator(".paginator a").all_text_contents()
    assert pages[-1] == "7"  # rows 61..70 hold at least row 61
    links = page.locator(".paginator a").evaluate_all("els => els.map(e => e.href)")
    for link in links:
        page.goto(link)
        assert changelist_rows(page) > 0, link
    page.screenshot(path=str(ARTIFACTS / "events-more-than.png"), full_page=True)
    page.goto(f"{live_server.url}/admin/ledger/event/?kind=checkpoint.recorded")
    assert page.locator("[data-testid=search-count]").inner_text().startswith(
        "more than 60 results")
    page.close()


def test_goal_schedules_are_read_only_and_the_root_leads_somewhere(browser, live_server):
    user("root", None)
    demo.create()
    schedule = Schedule.objects.first()
    assert schedule is not None  # the demo's internal watchdogs have schedules
    page = login(browser, live_server, "root")
    assert page.locator("#user-tools a", has_text="View site").get_attribute("href") == \
        "/api/v1/docs"
    page.goto(f"{live_server.url}/admin/django_q/schedule/")
    assert changelist_rows(page) == Schedule.objects.count()
    assert page.locator("#content a.addlink").count() == 0
    assert page.locator("select[name=action]").count() == 0
    page.goto(f"{live_server.url}/admin/django_q/schedule/{schedule.pk}/change/")
    assert page.locator("input[type=submit]").count() == 0
    assert page.locator("input[name=func], select[name=schedule_type]").count() == 0
    page.screenshot(path=str(ARTIFACTS / "schedule-read-only.png"), full_page=True)
    assert page.goto(f"{live_server.url}/admin/django_q/schedule/add/").status == 403
    for model in ("success", "failure"):
        page.goto(f"{live_server.url}/admin/django_q/{model}/")
        assert page.locator("select[name=action]").count() == 0

    # Users and groups stay editable by superusers (docs/operators.md says so).
    page.goto(f"{live_server.url}/admin/auth/user/")
    assert page.locator("#content a.addlink").count() == 1

    # The bare host: a browser lands on the admin.
    page.goto(f"{live_server.url}/")
    assert page.url == f"{live_server.url}/admin/"
    page.close()


def test_an_operator_is_offered_only_what_the_domain_accepts(browser, live_server):
    user("olga", "operator")
    running = GoalFactory(goal_key="running-one", checkpoints=1)
    stopped = GoalFactory(goal_key="stopped-one", checkpoints=1)
    store.execute(stopped.pk, Stop("olga", "abandoned"), actor="olga")
    page = login(browser, live_server, "olga")
    page.goto(f"{live_server.url}/admin/ledger/goal/{running.pk}/timeline/")
    assert page.locator("[data-testid=action-stop]").count() == 1
    assert page.locator("[data-testid=action-recover]").count() == 0
    assert "cannot be recovered" in page.locator("[data-testid=not-offered-recover]").inner_text()
    page.screenshot(path=str(ARTIFACTS / "actions-running.png"))
    page.goto(f"{live_server.url}/admin/ledger/goal/{stopped.pk}/timeline/")
    assert page.locator("[data-testid=action-stop]").count() == 0
    assert page.locator("[data-testid=action-recover]").count() == 0
    assert page.locator("[data-testid=action-replay]").count() == 1
    page.close()


def test_the_lists_show_what_an_auditor_needs_in_utc_unclipped_at_1400px(browser,
                                                                        live_server):
    """Id prefix, objective, lease holder and
    next wake on the goal list; a summary and the goal's id prefix on the event
    list; times in UTC to the second with sortable columns; nothing wider than
    a 1400 px window; a favicon; a typed id prefix opens its goal."""
    user("audra", "auditor")
    demo.create()
    page = login(browser, live_server, "audra")
    page.set_viewport_size({"width": 1400, "height": 900})
    stamp = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$")
    for path, columns in (("goal", ("id", "objective", "holder", "next wake",
                                    "updated")),
                          ("event", ("goal id", "summary", "recorded (utc)"))):
        page.goto(f"{live_server.url}/admin/ledger/{path}/")
        headers = [h.strip().lower()
                   for h in page.locator("#result_list thead th").all_inner_texts()]
        for column in columns:
            assert column in headers, (path, headers)
        times = page.locator("#result_list time.wl-time").all_inner_texts()
        assert times and all(stamp.match(t) for t in times), times[:3]
        assert "a.m." not in page.content() and "p.m." not in page.content()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 1400, f"{path} list is {width} px wide"
        # Nor scrolled inside its own box (Django's .results scrolls sideways).
        table, box = page.evaluate("[document.querySelector('#result_list').scrollWidth, "
                                   "document.querySelector('.results').clientWidth]")
        widths = page.evaluate("[...document.querySelectorAll('#result_list thead th')]"
                               ".map(th => th.innerText.trim() + ':' + th.offsetWidth)")
        assert table <= box, f"{path} list is {table} px in a {box} px box: {widths}"
        page.screenshot(path=str(ARTIFACTS / f"{path}-list-1400.png"), full_page=True)
    # The time columns sort.
    page.goto(f"{live_server.url}/admin/ledger/goal/")
    page.click("#result_list thead th:has-text('next wake') a")
    assert "o=" in page.url
    # The favicon, on the admin and for any other page.
    icon = page.locator("link[rel=icon]").get_attribute("href")
    assert icon.endswith(".svg")
    assert page.request.get(f"{live_server.url}{icon}").status == 200
    assert page.request.get(f"{live_server.url}/favicon.ico").status == 200
    # The 8 digits the list shows open the goal.
    goal = Goal.objects.filter(agent=demo.AGENT).first()
    page.goto(f"{live_server.url}/admin/ledger/goal/{goal.pk.hex[:8]}/")
    page.wait_for_url(f"**/admin/ledger/goal/{goal.pk}/timeline/")
    assert page.locator("[data-testid=chart]").count() == 1
    assert page.goto(f"{live_server.url}/admin/ledger/goal/not-a-goal/timeline/").status == 404


def test_the_timeline_header_shows_how_a_goal_ended_and_its_pauses(browser, live_server):
    """The completion, its evidence and each rate limit are in
    the first screen; the chart shades the pause; an ended goal gets one line."""
    user("olga", "operator")
    made = {m.goal_key: m for m in demo.create()}
    goal = made["checkout-flaky-test"]  # rate limited, woken, resumed, completed
    page = login(browser, live_server, "olga")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{live_server.url}/admin/ledger/goal/{goal.goal_id}/timeline/")
    for testid in ("ending", "evidence", "interruptions"):
        box = page.locator(f"[data-testid={testid}]").bounding_box()
        assert box and box["y"] + min(box["height"], 40) < 800, testid  # without scrolling
    assert "until" in page.locator("[data-testid=interruptions]").inner_text()
    assert page.locator("[data-testid=no-action]").count() == 1
    assert page.locator(".wl-not-offered").count() == 1
    spans = page.locator("[data-testid=chart] [data-testid=pause-span]")
    assert spans.count() >= 1
    assert all((spans.nth(i).bounding_box() or {}).get("width", 0) >= 2
               for i in range(spans.count()))
    page.screenshot(path=str(ARTIFACTS / "timeline-header.png"))
    page.locator("[data-testid=chart]").screenshot(path=str(ARTIFACTS / "chart-pauses.png"))
    page.close()


# What an operator reads at 1400 px, with real-world lengths.
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
LONG_ROOT = "/home/alice-the-operator/projects/customer-portal-monorepo/services"
# Every cell, header and box of a list or the dashboard that overflows its own
# width (a clipped column, a table wider than its box): "tag.class W>w text".
OVERFLOWING = """() => [...document.querySelectorAll(
    '#result_list td, #result_list th, .results, #wl-dashboard td, #wl-dashboard th, '
    + '#wl-dashboard table, #wl-dashboard section, #content-main, #changelist')]
  .filter(el => el.scrollWidth > el.clientWidth + 1)
  .map(el => `${el.tagName}.${el.className} ${el.scrollWidth}>${el.clientWidth} `
             + el.innerText.slice(0, 40))"""


def long_goals() -> list[Goal]:
    """Three goals whose workspaces differ only at their end, two blocked."""
    made = []
    for n, tail in enumerate(("billing-reconciliation-worker", "billing-reconciliation-api",
                              "search-indexer-nightly-rebuild")):
        goal = GoalFactory(workspace=f"{LONG_ROOT}/{tail}",
                           goal_key=f"quarterly-{tail}-with-a-long-key",
                           agent="claude-code-agent-on-build-host-17",
                           objective="Reconcile every invoice of the quarter against the "
                                     "payment provider and write a report of the differences "
                                     "with evidence for each one (" + "x" * 60 + ")")
        if n < 2:
            state = GoalState.from_dict(goal.state)
            store.execute(goal.pk, ReportRun(proof_of(state), "error", "unclassified"),
                          actor=goal.agent)
        made.append(goal)
    return made


def test_the_goal_list_and_the_dashboard_fit_1400px_with_full_text_reachable(browser,
                                                                            live_server):
    user("opal", "operator")
    demo.create()
    goals = long_goals()
    page = login(browser, live_server, "opal")
    page.set_viewport_size({"width": 1400, "height": 900})
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    page.goto(f"{live_server.url}/admin/ledger/goal/")
    assert page.evaluate(OVERFLOWING) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    # The last column is whole on the screen, not clipped by the list's box.
    box = page.locator(".results").bounding_box()
    last = page.locator("#result_list thead th").last.bounding_box()
    assert last["x"] + last["width"] <= box["x"] + box["width"] + 1
    # Workspaces are cut from the left: each one's distinguishing tail is what shows.
    for goal in goals:
        cell = page.locator(f"#result_list tr:has(span[title='{goal.pk}']) .wl-cut-left")
        assert cell.get_attribute("title") == goal.workspace  # the whole path, reachable
        shown = cell.bounding_box()
        text = cell.locator("bdi").bounding_box()
        assert text["x"] < shown["x"]  # the beginning is what is cut…
        assert abs((text["x"] + text["width"]) - (shown["x"] + shown["width"])) <= 2  # …not the end
    page.screenshot(path=str(SCREENSHOTS / "goal-list-1400.png"), full_page=True)

    # The hourly repair's kept pass found a wake row missing and repaired it:
    # its finding line (a long row name) sits under the goal's status.
    gid = str(goals[2].pk)
    passes.record("scheduler", timezone.now(), timezone.now(), [doctor.Finding(
        gid, "schedule_missing", "its django-q2 row is missing",
        row=f"wakeledger-watchdog-{gid}")],
        active=Goal.objects.filter(status__in=ACTIVE_STATUSES).count(),
        outcomes={gid: "receipt.recorded repaired: the schedule row was missing"})
    page.goto(f"{live_server.url}/admin/ledger/goal/dashboard/")
    assert page.evaluate(OVERFLOWING) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    assert page.locator("[data-testid=finding]").inner_text() == (
        f"schedule_missing wakeledger-watchdog-{gid}: receipt.recorded repaired: the "
        "schedule row was missing")
    assert "by the hourly repair" in page.locator("[data-testid=wake-rows-checked]").inner_text()
    # Since when, in UTC to the second, with how long ago beside it.
    since = [" ".join(text.split())
             for text in page.locator("[data-testid=since]").all_inner_texts()]
    stamp = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \((now|[\dhmsd]+ ago)\)")
    assert since and all(stamp.fullmatch(text) for text in since), since
    assert LONG_ROOT + "/billing-reconciliation-api" in page.content()  # whole, wrapped
    page.screenshot(path=str(SCREENSHOTS / "dashboard-1400.png"), full_page=True)

    page.goto(f"{live_server.url}/admin/ledger/event/")
    assert page.evaluate(OVERFLOWING) == []
    page.screenshot(path=str(SCREENSHOTS / "event-list-1400.png"), full_page=True)
    page.close()


# A word broken across two lines inside it ("quickstar" / "t-agent"): for each
# text node of the cells, two letters or digits in a row on different lines.
# Words longer than 24 characters (a hash, a run of x's) may break anywhere.
BROKEN_WORDS = """(selector) => {
  const broken = [];
  for (const el of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (node.parentElement.closest('pre, .wl-cut, .wl-clamp, svg')) continue;
      const text = node.textContent;
      let top = null;
      for (let i = 0; i < text.length; i++) {
        const range = document.createRange();
        range.setStart(node, i); range.setEnd(node, i + 1);
        const rect = range.getClientRects()[0];
        if (!rect || !rect.width) { top = null; continue; }
        const word = /[A-Za-z0-9]/;
        if (top !== null && rect.top > top + 2 && word.test(text[i]) && word.test(text[i - 1])) {
          const m = text.slice(0, i).match(/[A-Za-z0-9]*$/)[0]
                  + text.slice(i).match(/^[A-Za-z0-9]*/)[0];
          if (m.length <= 24) broken.push(`${el.tagName}.${el.className}: `
                                          + `${text.slice(0, i)}|${text.slice(i)}`.slice(-60));
        }
        top = rect.top;
      }
    }
  }
  return broken;
}"""
# A cell whose own text overflows it (clipped), at any width: the lists may
# scroll sideways in their box at 800 px, but no cell may cut its text.
CLIPPED_CELLS = """(selector) => [...document.querySelectorAll(selector)]
  .filter(el => el.scrollWidth > el.clientWidth + 1)
  .map(el => `${el.tagName}.${el.className} ${el.scrollWidth}>${el.clientWidth} `
             + el.innerText.slice(0, 40))"""
CELLS = (
    "#result_list td, #result_list th, #wl-dashboard td, #wl-dashboard th, dl.wl-grid dd, "
    "#changelist-filter a")


def test_the_lists_the_timeline_and_the_dashboard_read_right_at_1400_and_800px(
        browser, live_server):
    """No name broken mid-word, no cell clipped, no two phrases glued, at a
    1400 px window and at 800 px: the goal list, a timeline, the dashboard
    and the notifications list."""
    from ledger.notify.models import Notification

    user("opal", "operator")
    demo.create()
    long_goals()
    quick = GoalFactory(goal_key="quickstart-hello", agent="quickstart-agent")
    blocked_goal()
    now = timezone.now()
    passes.record("scheduler", now, now, [], active=0)
    for n, goal in enumerate(Goal.objects.order_by("created_at")[:4]):
        Notification.objects.create(
            key=f"needs_human:{goal.pk}:{n}", kind="needs_human", goal_id=goal.pk,
            reason="UNCLASSIFIED", channel="env:1", channel_redacted="json://hooks.example/…",
            title="t", body="b", status="sent", attempts=1, created_at=now,
            next_attempt_at=now, done_at=now)
    page = login(browser, live_server, "opal")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for width in (1400, 800):
        page.set_viewport_size({"width": width, "height": 900})
        for name, path in (("goal-list", "/admin/ledger/goal/"),
                           ("timeline", f"/admin/ledger/goal/{quick.pk}/timeline/"),
                           ("dashboard", "/admin/ledger/goal/dashboard/"),
                           ("notifications", "/admin/ledger/notification/")):
            page.goto(f"{live_server.url}{path}")
            page.screenshot(path=str(SCREENSHOTS / f"{name}-{width}.png"), full_page=True)
            assert page.evaluate(BROKEN_WORDS, CELLS) == [], (name, width)
            assert page.evaluate(CLIPPED_CELLS, CELLS) == [], (name, width)
            text = page.locator("#content").inner_text()
            assert "nobody yetall" not in text and "yetall" not in text, (name, width)
            # A date and a time each on one line (at 800 px the dashboard's
            # "notified" dates broke at their hyphens).
            lines = page.evaluate("""() => [...document.querySelectorAll(
                '[data-testid=notified-at] span')].map(el => el.getClientRects().length)""")
            assert all(count == 1 for count in lines), (name, width, lines)
            if name == "dashboard":
                assert lines, "the dashboard shows no notified date: the check saw nothing"
        page.goto(f"{live_server.url}/admin/ledger/goal/")
        agent = page.locator(f"#result_list tr:has(span[title='{quick.pk}']) td.field-agent")
        assert agent.inner_text().replace("\n", "") == "quickstart-agent"
        page.goto(f"{live_server.url}/admin/ledger/notification/")
        keys = page.locator("#result_list td.field-goal a").all_inner_texts()
        assert keys and all(not re.fullmatch(r"[0-9a-f]{8}", key) for key in keys), keys
    page.close()


def test_an_auditor_sees_the_log_alarm_after_an_sql_only_rewrite(browser, live_server,
                                                                  sealer_record):
    """A sealed checkpoint rewritten by SQL, its goal's chain recomputed (so
    every chain verifies): the sealer raises its alarm, and the auditor is
    told so on the home page, the log's page and every goal's timeline."""
    from ledger.eventstore import triggers
    from ledger.log import sealer_state, sealing
    from ledger.models import LogLeaf
    from tests.log.test_log_attacks import json_value, rehash_goal, sql

    user("audrey", "auditor")
    victim = GoalFactory(goal_key="rewritten", checkpoints=3)
    bystander = GoalFactory(goal_key="bystander", checkpoints=2)
    sealing.seal()
    event = Event.objects.filter(goal=victim, kind="checkpoint.recorded").first()
    triggers.drop(connection)
    try:
        sql("UPDATE ledger_event SET data = %s WHERE id = %s",
            json_value({**event.data, "current_step": "forged by SQL"}), event.id)
        rehash_goal(victim.pk)
        with pytest.raises(sealer_state.LogInconsistent):
            sealing.seal()
        page = login(browser, live_server, "audrey")
        assert "ALARM" in page.locator("[data-testid=log-health]").inner_text()
        page.click("[data-testid=log-page-link]")
        assert page.locator("[data-testid=log-state]").inner_text() == \
            "NOT verified: the log's alarm is raised"
        position = LogLeaf.objects.get(event_id=event.id).position
        assert f"leaf {position}: event {event.id}" in \
            page.locator("[data-testid=log-alarm]").inner_text()
        page.screenshot(path=str(ARTIFACTS / "log-alarm.png"), full_page=True)

        page.goto(f"{live_server.url}/admin/ledger/goal/{victim.pk}/timeline/")
        assert page.locator("[data-testid=chain]").inner_text() == \
            "chain NOT verified: its sealed events differ from the log"
        assert page.locator("[data-testid=log-check]").inner_text().startswith(
            f"log check FAILED: event(s) seq {event.seq}")
        assert page.locator("[data-testid=log-alarm]").is_visible()
        page.screenshot(path=str(ARTIFACTS / "timeline-log-alarm.png"), full_page=True)
        page.click("text=verify the whole chain")
        assert "whole chain verified" not in page.content()

        page.goto(f"{live_server.url}/admin/ledger/goal/{bystander.pk}/timeline/")
        assert page.locator("[data-testid=chain]").inner_text() == \
            "chain NOT verified: the log's alarm is raised"
        assert "verified (this page)" not in page.content()
        page.close()
    finally:
        triggers.install(connection)

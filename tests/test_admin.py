"""The admin: read-only for everyone, a timeline per goal, a stuck-goals
dashboard, operator actions through the domain commands."""

import time

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from ledger import chain, clock, store
from ledger.domain import GoalState, RecordCheckpoint, evolve
from ledger.domain.runs import ReportRun, RequestApproval
from ledger.models import Event, Goal
from tests.factories import GoalFactory, proof_of

pytestmark = pytest.mark.django_db


def staff(username: str, role: str | None = None, superuser: bool = False) -> Client:
    users = get_user_model()
    if superuser:
        user = users.objects.create_superuser(username, password="pw-for-tests")
    else:
        user = users.objects.create_user(username, password="pw-for-tests", is_staff=True)
        user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return client


def blocked_goal(reason_class: str = "unclassified") -> Goal:
    goal = GoalFactory(checkpoints=2)
    state = GoalState.from_dict(goal.state)
    store.execute(goal.pk, ReportRun(proof_of(state), "error", reason_class),
                      actor="agent-1")
    return Goal.objects.get(pk=goal.pk)


def gated_goal() -> Goal:
    goal = GoalFactory(checkpoints=1)
    state = GoalState.from_dict(goal.state)
    store.execute(goal.pk, RequestApproval(proof_of(state), "deploy", "ship it"), actor="agent-1")
    return Goal.objects.get(pk=goal.pk)


# ------------------------------------------------------------------ read-only


@pytest.mark.parametrize("role", ["superuser", "operator", "auditor"])
def test_no_admin_url_adds_changes_or_deletes(role):
    client = staff(f"user-{role}", role, superuser=role == "superuser")
    goal = GoalFactory(checkpoints=1)
    event = Event.objects.filter(goal=goal).first()
    before = (Event.objects.count(), list(Goal.objects.values_list("version", "state")))
    for model, pk in (("goal", goal.pk), ("event", event.pk)):
        assert client.get(f"/admin/ledger/{model}/add/").status_code == 403
        assert client.post(f"/admin/ledger/{model}/add/", {}).status_code == 403
        assert client.post(f"/admin/ledger/{model}/{pk}/delete/", {"post": "yes"}) \
            .status_code == 403
        bulk = client.post(f"/admin/ledger/{model}/", {"action": "delete_selected",
                                                        "_selected_action": [pk]})
        assert bulk.status_code in (200, 302)
        changelist = client.get(f"/admin/ledger/{model}/").content.decode()
        assert 'value="delete_selected"' not in changelist
        assert f'href="/admin/ledger/{model}/add/"' not in changelist
    change = client.post(f"/admin/ledger/event/{event.pk}/change/", {"kind": "x"})
    assert change.status_code == 403
    # A goal's change page is its timeline.
    assert client.get(f"/admin/ledger/goal/{goal.pk}/change/").url.endswith(
        f"/admin/ledger/goal/{goal.pk}/timeline/")
    assert (Event.objects.count(), list(Goal.objects.values_list("version", "state"))) == before


def test_auditors_see_no_operator_actions(client):
    auditor = staff("audrey", "auditor")
    goal = blocked_goal()
    page = auditor.get(f"/admin/ledger/goal/{goal.pk}/timeline/").content.decode()
    assert "operator-actions" not in page
    for action in ("stop", "recover", "replay"):
        response = auditor.post(f"/admin/ledger/goal/{goal.pk}/act/{action}/",
                                {"reason": "x"})
        assert response.status_code == 403
    assert Goal.objects.get(pk=goal.pk).status == "blocked"


def test_search_filters_and_event_changelist():
    client = staff("audrey", "auditor")
    goal = GoalFactory(goal_key="findme-42", checkpoints=3)
    listing = client.get("/admin/ledger/goal/", {"q": "findme"}).content.decode()
    assert "findme-42" in listing
    assert "findme-42" in client.get("/admin/ledger/goal/", {"q": str(goal.pk)}).content.decode()
    assert client.get("/admin/ledger/goal/", {"q": "not-a-uuid-at-all"}).status_code == 200
    assert client.get("/admin/ledger/goal/", {"status__exact": "running"}).status_code == 200
    events = client.get("/admin/ledger/event/", {"kind": "checkpoint.recorded"})
    assert events.status_code == 200 and "checkpoint.recorded" in events.content.decode()
    assert client.get("/admin/ledger/event/", {"q": str(goal.pk)}).status_code == 200


# ------------------------------------------------------------------ timeline


def test_timeline_shows_state_events_chart_and_chain():
    client = staff("audrey", "auditor")
    goal = GoalFactory(checkpoints=60)
    page = client.get(f"/admin/ledger/goal/{goal.pk}/timeline/").content.decode()
    assert goal.goal_key in page and "chain verified (this page)" in page
    assert page.count('data-testid="event"') == 50
    assert f'id="seq-{goal.version}"' in page and 'data-testid="chart"' in page
    assert "<details>" in page  # raw JSON, folded
    older = client.get(f"/admin/ledger/goal/{goal.pk}/timeline/",
                       {"before": goal.version - 49}).content.decode()
    assert older.count('data-testid="event"') == goal.version - 50
    full = client.get(f"/admin/ledger/goal/{goal.pk}/timeline/", {"verify": "all"})
    assert f"whole chain verified: {goal.version} events" in full.content.decode()


def test_timeline_names_a_broken_link():
    from ledger import triggers

    client = staff("audrey", "auditor")
    goal = GoalFactory(checkpoints=3)
    triggers.drop(connection)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE ledger_event SET actor = 'mallory' WHERE goal_id = %s AND seq = 4",
                       [Goal._meta.pk.get_db_prep_value(goal.pk, connection)])
    triggers.install(connection)
    page = client.get(f"/admin/ledger/goal/{goal.pk}/timeline/").content.decode()
    assert "chain broken at seq 4" in page


def seed_history(total: int) -> Goal:
    """A goal with ``total`` events, made fast: the same decide/evolve/hash
    chain as the store, inserted in bulk (seeding only; the store itself
    appends one command at a time)."""
    goal = GoalFactory()
    state = GoalState.from_dict(goal.state)
    head, rows = goal.last_hash, []
    now = clock.now()
    from ledger.domain import decide

    for _ in range(total - goal.version):
        [event] = decide(state, RecordCheckpoint(current_step="step", progress_pct=50,
                                                 proof=proof_of(state)), now)
        state = evolve(state, event)
        digest = chain.event_hash(head, str(goal.pk), state.version, event.kind, event.data,
                                  "agent-1", event.at)
        rows.append(Event(goal=goal, seq=state.version, kind=event.kind, data=event.data,
                          actor="agent-1", recorded_at=event.at, prev_hash=head, hash=digest))
        head = digest
    Event.objects.bulk_create(rows, batch_size=5000)
    Goal.objects.filter(pk=goal.pk).update(state=state.to_dict(), version=state.version,
                                           last_hash=head, **store.projected_columns(state))
    return Goal.objects.get(pk=goal.pk)


@pytest.mark.slow
def test_a_100k_event_timeline_opens_with_bounded_queries():
    client = staff("audrey", "auditor")
    small, big = seed_history(100), seed_history(100_000)
    counts, seconds = {}, {}
    for goal in (small, big):
        client.get(f"/admin/ledger/goal/{goal.pk}/timeline/")  # warm up
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            response = client.get(f"/admin/ledger/goal/{goal.pk}/timeline/",
                                  {"before": goal.version // 2 + 1})
            seconds[goal.version] = time.perf_counter() - started
        assert response.status_code == 200
        assert response.content.decode().count('data-testid="event"') == 50
        counts[goal.version] = len(queries)
    assert counts[big.version] == counts[small.version] <= 12
    print(f"timeline server time: {seconds}")  # measured, reported; not a timed assertion


# ------------------------------------------------------------------ dashboard


def test_dashboard_groups_goals_needing_attention():
    client = staff("olga", "operator")
    blocked_goal()
    gated_goal()
    GoalFactory()  # a healthy running goal
    page = client.get("/admin/ledger/goal/dashboard/").content.decode()
    assert "Blocked: UNCLASSIFIED" in page and "Blocked: BLOCKED_APPROVAL" in page
    assert page.count('data-testid="group"') == 2
    assert "Stuck goals dashboard" in client.get("/admin/").content.decode()


# ------------------------------------------------------------------ operator actions


def act(client, goal, action, **data):
    return client.post(f"/admin/ledger/goal/{goal.pk}/act/{action}/", data)


def test_operator_actions_append_events_with_the_operators_name():
    client = staff("olga", "operator")
    blocked = blocked_goal()
    assert act(client, blocked, "recover", reason="looked at it").status_code == 302
    recovered = Event.objects.get(goal=blocked, kind="goal.recovered")
    assert (recovered.actor, recovered.data["operator"], recovered.data["reason"]) == \
        ("olga", "olga", "looked at it")

    act(client, blocked, "stop", reason="abandoned")
    stopped = Event.objects.get(goal=blocked, kind="goal.stopped")
    assert (stopped.actor, stopped.data["reason"]) == ("olga", "abandoned")

    gated = gated_goal()
    act(client, gated, "approve", gate="deploy", reason="fine")
    approved = Event.objects.get(goal=gated, kind="approval.resolved")
    assert (approved.actor, approved.data["decision"]) == ("olga", "approve")

    rejected_goal = gated_goal()
    act(client, rejected_goal, "reject", gate="deploy", reason="no")
    assert Goal.objects.get(pk=rejected_goal.pk).reason == "APPROVAL_REJECTED"
    assert Event.objects.get(goal=rejected_goal, kind="approval.resolved").actor == "olga"


def test_an_action_needs_a_reason_and_a_refusal_is_shown():
    client = staff("olga", "operator")
    goal = GoalFactory()  # running: not recoverable
    form = act(client, goal, "recover", reason="")
    assert form.status_code == 200 and "This field is required" in form.content.decode()
    refused = client.post(f"/admin/ledger/goal/{goal.pk}/act/recover/",
                          {"reason": "try"}, follow=True)
    assert "Refused (not_recoverable)" in refused.content.decode()
    assert not Event.objects.filter(goal=goal, kind="goal.recovered").exists()


def test_replay_shows_the_diff_first_then_fixes():
    client = staff("olga", "operator")
    goal = GoalFactory(checkpoints=2)
    Goal.objects.filter(pk=goal.pk).update(status="done")
    preview = client.get(f"/admin/ledger/goal/{goal.pk}/act/replay/").content.decode()
    assert 'data-testid="diff"' in preview and "status" in preview
    assert Goal.objects.get(pk=goal.pk).status == "done"  # nothing changed yet
    client.post(f"/admin/ledger/goal/{goal.pk}/act/replay/")
    assert Goal.objects.get(pk=goal.pk).status == "running"
    clean = client.get(f"/admin/ledger/goal/{goal.pk}/act/replay/").content.decode()
    assert 'data-testid="no-diff"' in clean

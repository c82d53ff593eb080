"""The agents' REST API: goals, leases, checkpoints, finish, resume."""

from datetime import timedelta

import pytest

from ledger.models import Event, Goal
from tests.factories import COMPLETED

pytestmark = pytest.mark.django_db


def lease_of(response) -> dict:
    return {"token": response.json()["lease"]["token"],
            "generation": response.json()["lease"]["generation"]}


def test_run_goal_creates_the_goal_takes_the_lease_and_answers_preflight(agent, clock):
    response = agent.start(timeout_seconds=3600, estimated_duration_seconds=3000,
                           session={"session_key": "shop-1", "timezone": "Europe/Istanbul"})
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["created"] is True and body["acquired"] is True
    assert body["lease"]["generation"] == 1 and body["lease"]["token"].startswith("wll_")
    assert body["goal"]["status"] == "running"
    assert body["goal"]["agent"] == "agent-1"
    assert body["goal"]["lease"]["holder"] == "agent-1"
    assert "token_sha256" not in body["goal"]["lease"]
    assert body["preflight"]["wakes_needed"] is True
    assert body["preflight"]["suggested_chunk_seconds"] == 900
    assert body["preflight"]["autosave_deadline"] == "2026-12-02T09:08:30.000000Z"


def test_run_goal_again_returns_the_same_goal_without_a_second_lease(agent, clock):
    first = agent.start().json()
    again = agent.start()
    assert again.status_code == 200
    body = again.json()
    assert body["goal"]["id"] == first["goal"]["id"] and body["created"] is False
    assert body["acquired"] is False and body["lease"] is None
    assert body["next_required_action"] == "wait_for_holder"
    assert body["retry_after_seconds"] == 660
    assert Goal.objects.count() == 1


def test_resuming_after_a_release_takes_a_new_generation(agent, clock):
    first = agent.start().json()
    gid = first["goal"]["id"]
    released = agent.post(f"goals/{gid}/lease/release", {"lease": lease_of_body(first)})
    assert released.status_code == 200 and released.json()["status"] == "waiting"
    again = agent.start().json()
    assert again["acquired"] is True and again["lease"]["generation"] == 2


def lease_of_body(body: dict) -> dict:
    return {"token": body["lease"]["token"], "generation": body["lease"]["generation"]}


def test_workspace_binding_refuses_another_key_until_released(agent, operator, clock):
    first = agent.start().json()
    refused = agent.start(goal_key="issue-2", workspace="/srv/repos/shop/")
    assert refused.status_code == 409 and refused.json()["code"] == "workspace_bound"
    gid = first["goal"]["id"]
    released = agent.post(f"goals/{gid}/workspace/release", {"lease": lease_of_body(first)})
    assert released.status_code == 200 and released.json()["workspace_bound"] is False
    assert agent.start(goal_key="issue-2").status_code == 201
    # Operators may release without the lease.
    third = agent.start(goal_key="issue-3", workspace="/srv/repos/other").json()
    by_operator = operator.post(f"goals/{third['goal']['id']}/workspace/release",
                                {"reason": "agent crashed"})
    assert by_operator.status_code == 200 and by_operator.json()["workspace_bound"] is False


def test_one_active_goal_per_session_key(agent, clock):
    assert agent.start(session={"session_key": "s-1"}).status_code == 201
    refused = agent.start(goal_key="issue-2", workspace="/srv/other",
                          session={"session_key": "s-1"})
    assert refused.status_code == 409 and refused.json()["code"] == "session_bound"


def test_sessions_that_share_a_workspace_are_each_their_own_goal_at_once(agent, clock):
    """Two chats of one OpenClaw agent, one workspace: both tracked at once,
    each held by its session key; a workspace goal there is not blocked by them."""
    first = agent.start(goal_key="chat-1",
                        session={"session_key": "agent:main:a", "binds": "session"})
    second = agent.start(goal_key="chat-2",
                         session={"session_key": "agent:main:b", "binds": "session"})
    assert (first.status_code, second.status_code) == (201, 201), second.json()
    assert second.json()["goal"]["workspace_bound"] is False
    assert agent.start(goal_key="plain").status_code == 201  # binds the workspace
    again = agent.start(goal_key="chat-3",
                        session={"session_key": "agent:main:a", "binds": "session"})
    assert again.status_code == 409 and again.json()["code"] == "session_bound"
    bad = agent.start(goal_key="chat-4", session={"session_key": "k", "binds": "folder"})
    assert bad.status_code == 400 and bad.json()["code"] == "validation_error"


def test_another_agents_binding_does_not_block_a_start(agent, other_agent, operator, clock):
    """Squatting: agent-1 binds /srv/repos/shop and the session key "s-1"
    first. agent-2 is blocked by neither: paths are host-local (its
    /srv/repos/shop is another machine's) and session keys are its own names.
    Within each agent, the binding and the session key still hold."""
    first = agent.start(session={"session_key": "s-1"})
    assert first.status_code == 201
    theirs = other_agent.start(goal_key="issue-2", session={"session_key": "s-1"})
    assert theirs.status_code == 201, theirs.json()
    body = theirs.json()
    assert body["acquired"] is True and body["goal"]["workspace_bound"] is True
    assert Goal.objects.get(pk=body["goal"]["id"]).session_key == "s-1"
    assert first.json()["goal"]["id"] not in theirs.content.decode()

    # agent-1 cannot bind its workspace twice, nor reuse its session key;
    # agent-2 neither, now that it holds its own.
    for api in (agent, other_agent):
        refused = api.start(goal_key="issue-3")
        assert refused.status_code == 409 and refused.json()["code"] == "workspace_bound"
        refused = api.start(goal_key="issue-3", workspace="/srv/elsewhere",
                            session={"session_key": "s-1"})
        assert refused.status_code == 409 and refused.json()["code"] == "session_bound"
    # A refusal names neither the agent's own goal nor the other agent's.
    assert first.json()["goal"]["id"] not in refused.content.decode()
    # Each sees its own goal only; an operator sees both.
    assert [g["agent"] for g in other_agent.get("goals").json()["results"]] == ["agent-2"]
    assert [g["agent"] for g in agent.get("goals").json()["results"]] == ["agent-1"]
    assert len(operator.get("goals", workspace="/srv/repos/shop").json()["results"]) == 2


def test_releasing_one_agents_binding_leaves_the_others(agent, other_agent, operator, clock):
    mine = agent.start().json()
    theirs = other_agent.start().json()
    released = operator.post(f"goals/{mine['goal']['id']}/workspace/release",
                             {"reason": "agent crashed"})
    assert released.status_code == 200 and released.json()["workspace_bound"] is False
    assert agent.start(goal_key="issue-2").status_code == 201
    refused = other_agent.start(goal_key="issue-2")
    assert refused.status_code == 409 and refused.json()["code"] == "workspace_bound"
    assert Goal.objects.get(pk=theirs["goal"]["id"]).workspace_bound is True


def test_checkpoint_heartbeat_and_finish(agent, clock):
    body = agent.start().json()
    gid, lease = body["goal"]["id"], lease_of_body(body)
    clock.advance(minutes=2)
    cp = agent.post(f"goals/{gid}/checkpoints", {
        "lease": lease, "current_step": "tests written", "progress_pct": 40,
        "completed": ["reproduced"], "next_actions": ["fix the race"],
        "artifacts": [{"path": "tests/test_checkout.py", "sha256": "a" * 64, "bytes": 10}]})
    assert cp.status_code == 201, cp.json()
    assert cp.json()["checkpoint"]["progress_pct"] == 40
    assert cp.json()["checkpoint"]["last_completed"] == ["reproduced"]

    clock.advance(minutes=5)
    beat = agent.post(f"goals/{gid}/lease/heartbeat", {"lease": lease})
    assert beat.status_code == 200
    assert beat.json()["expires_at"] == "2026-12-02T09:17:00.000000Z"

    contract = agent.get(f"goals/{gid}/checkpoint").json()
    assert list(contract) == ["task_id", "goal", "status", "current_step", "progress_pct",
                              "last_completed", "next_actions", "artifacts", "errors",
                              "retry_count", "updated_at"]
    resume = agent.get(f"goals/{gid}/resume").json()
    assert resume["next_actions"] == ["fix the race"]
    assert resume["artifacts_to_verify"][0]["path"] == "tests/test_checkout.py"

    done = agent.post(f"goals/{gid}/finish", {"lease": lease, **COMPLETED})
    assert done.status_code == 200
    assert done.json()["completion_state"] == "completed"
    assert done.json()["goal"]["status"] == "done"
    late = agent.post(f"goals/{gid}/checkpoints", {"lease": lease, "current_step": "x",
                                                    "progress_pct": 50})
    assert late.status_code == 409 and late.json()["code"] == "goal_terminal"


def test_completion_records_its_evidence_and_the_timeline_shows_it(agent, clock):
    body = agent.start(done_criteria=["CI green", "p95 <= 200 ms"]).json()
    gid, lease = body["goal"]["id"], lease_of_body(body)
    done = agent.post(f"goals/{gid}/finish", {
        "lease": lease, "status": "completed", "summary": "shipped",
        "evidence": [{"criterion": "p95 <= 200 ms", "evidence": "k6 run 12: p95 181 ms"},
                     {"criterion": "CI green", "evidence": "https://ci.example/run/7"}]})
    assert done.status_code == 200, done.json()
    completion = Event.objects.get(goal_id=gid, kind="goal.completed")
    assert completion.data["evidence"] == [
        {"criterion": "CI green", "evidence": "https://ci.example/run/7"},
        {"criterion": "p95 <= 200 ms", "evidence": "k6 run 12: p95 181 ms"}]
    from ledger.operators.summaries import summary

    line = summary("goal.completed", completion.data)
    assert line.startswith("completed: shipped · evidence: “CI green” ⇒ https://ci.example")
    assert "“p95 <= 200 ms” ⇒ k6 run 12: p95 181 ms" in line


@pytest.mark.parametrize("body, field", [
    ({"status": "completed"}, "summary"),
    ({"status": "completed", "summary": "  "}, "summary"),
    ({"status": "completed", "summary": "merged"}, "evidence"),
    ({"status": "completed", "summary": "merged",
      "evidence": [{"criterion": "CI is green", "evidence": "run 7"}]}, "evidence[0].criterion"),
    ({"status": "completed", "summary": "merged",
      "evidence": [{"criterion": "CI green", "evidence": "run 7"},
                   {"criterion": "CI green", "evidence": "run 8"}]}, "evidence[1].criterion"),
    ({"status": "completed", "summary": "merged",
      "evidence": [{"criterion": "CI green", "evidence": ""}]}, "evidence[0].evidence"),
    ({"status": "completed", "summary": "merged",
      "evidence": [{"criterion": "CI green"}]}, "evidence[0].evidence"),
    ({"status": "completed", "summary": "merged",
      "evidence": [{"criterion": "CI green", "evidence": "ok", "proof": "x"}]},
     "evidence[0].proof"),
    ({"status": "completed", "summary": "merged", "evidence": "CI green"}, "evidence"),
    ({"status": "failed", "summary": "gave up", "evidence": COMPLETED["evidence"]},
     "evidence"),
])
def test_a_completion_without_summary_or_evidence_is_a_validation_error(agent, clock, body,
                                                                         field):
    started = agent.start().json()
    gid, lease = started["goal"]["id"], lease_of_body(started)
    before = Event.objects.filter(goal_id=gid).count()
    refused = agent.post(f"goals/{gid}/finish", {"lease": lease, **body})
    assert refused.status_code == 400, refused.json()
    assert refused.json()["code"] == "validation_error"
    assert field in refused.json()["errors"], refused.json()
    assert Event.objects.filter(goal_id=gid).count() == before
    assert Goal.objects.get(pk=gid).status == "running"


@pytest.mark.parametrize("status", ["failed", "blocked"])
def test_failed_and_blocked_need_no_evidence(agent, clock, status):
    started = agent.start().json()
    gid, lease = started["goal"]["id"], lease_of_body(started)
    ended = agent.post(f"goals/{gid}/finish", {"lease": lease, "status": status})
    assert ended.status_code == 200 and ended.json()["goal"]["status"] == status


def test_a_goal_without_done_criteria_completes_with_its_summary(agent, clock):
    started = agent.start(done_criteria=[]).json()
    gid, lease = started["goal"]["id"], lease_of_body(started)
    done = agent.post(f"goals/{gid}/finish", {"lease": lease, "status": "completed",
                                               "summary": "nothing to prove"})
    assert done.status_code == 200 and done.json()["goal"]["status"] == "done"
    assert Event.objects.get(goal_id=gid, kind="goal.completed").data["evidence"] == []


def test_release_lease_on_the_final_checkpoint(agent, clock):
    body = agent.start().json()
    gid, lease = body["goal"]["id"], lease_of_body(body)
    cp = agent.post(f"goals/{gid}/checkpoints", {"lease": lease, "current_step": "end of turn",
                                                  "progress_pct": 10, "release_lease": True})
    assert cp.status_code == 201 and cp.json()["lease_released"] is True
    assert agent.get(f"goals/{gid}").json()["status"] == "waiting"


def test_takeover_timing_and_fencing(agent, clock):
    body = agent.start(policy={"lease_seconds": 300}).json()
    gid, old = body["goal"]["id"], lease_of_body(body)

    clock.advance(seconds=299)  # still live
    live = agent.post(f"goals/{gid}/lease").json()
    assert live["acquired"] is False and live["next_required_action"] == "wait_for_holder"
    assert live["retry_after_seconds"] == 61

    clock.advance(seconds=31)  # expired 30 s ago: only the grace remains
    grace = agent.post(f"goals/{gid}/lease").json()
    assert grace["acquired"] is False
    assert grace["next_required_action"] == "retry_after_stale_grace"
    assert grace["retry_after_seconds"] == 30

    clock.advance(seconds=30)  # expiry + 60 s: stale, taken over
    taken = agent.post(f"goals/{gid}/lease").json()
    assert taken["acquired"] is True and taken["lease"]["generation"] == 2
    kinds = list(Event.objects.filter(goal_id=gid).values_list("kind", flat=True))
    assert kinds[-1] == "lease.taken_over"

    for path, extra in (("checkpoints", {"current_step": "late", "progress_pct": 5}),
                        ("lease/heartbeat", {}), ("lease/release", {}),
                        ("finish", COMPLETED)):
        stale = agent.post(f"goals/{gid}/{path}", {"lease": old, **extra})
        assert stale.status_code == 409, path
        assert stale.json()["code"] == "lease_lost"
        assert stale.json()["current_generation"] == 2
    new = {"token": taken["lease"]["token"], "generation": 2}
    assert agent.post(f"goals/{gid}/checkpoints", {"lease": new, "current_step": "resumed",
                                                    "progress_pct": 5}).status_code == 201


def test_a_wrong_token_with_the_right_generation_is_lease_lost(agent, clock):
    body = agent.start().json()
    gid = body["goal"]["id"]
    forged = {"token": "wll_forged", "generation": body["lease"]["generation"]}
    response = agent.post(f"goals/{gid}/lease/heartbeat", {"lease": forged})
    assert response.status_code == 409 and response.json()["code"] == "lease_lost"


def test_progress_regress_and_artifact_overwrite_rules(agent, clock):
    body = agent.start().json()
    gid, lease = body["goal"]["id"], lease_of_body(body)
    ok = {"lease": lease, "current_step": "a", "progress_pct": 50,
          "artifacts": [{"path": "out.bin", "sha256": "a" * 64, "bytes": 1}]}
    assert agent.post(f"goals/{gid}/checkpoints", ok).status_code == 201
    back = agent.post(f"goals/{gid}/checkpoints", {**ok, "progress_pct": 10, "artifacts": []})
    assert back.status_code == 409 and back.json()["code"] == "progress_regressed"
    blind = agent.post(f"goals/{gid}/checkpoints", {
        **ok, "artifacts": [{"path": "out.bin", "sha256": "b" * 64, "bytes": 2}]})
    assert blind.status_code == 409 and blind.json()["code"] == "artifact_conflict"
    stated = agent.post(f"goals/{gid}/checkpoints", {
        **ok, "artifacts": [{"path": "out.bin", "sha256": "b" * 64, "bytes": 2,
                             "previous_sha256": "a" * 64}]})
    assert stated.status_code == 201


def test_events_pagination(agent, clock):
    body = agent.start().json()
    gid, lease = body["goal"]["id"], lease_of_body(body)
    for i in range(5):
        agent.post(f"goals/{gid}/checkpoints", {"lease": lease, "current_step": f"s{i}",
                                                 "progress_pct": i})
    page = agent.get(f"goals/{gid}/events", after=0, limit=3).json()
    assert [e["seq"] for e in page["events"]] == [1, 2, 3]
    assert page["next_after"] == 3
    assert page["events"][0]["kind"] == "goal.started"
    rest = agent.get(f"goals/{gid}/events", after=3, limit=100).json()
    assert [e["seq"] for e in rest["events"]] == [4, 5, 6, 7, 8]
    assert rest["next_after"] is None
    assert rest["events"][0]["prev_hash"] == page["events"][-1]["hash"]


def test_goal_list_filters_and_cursor_pagination(agent, auditor, clock):
    for i in range(5):
        clock.advance(seconds=1)
        agent.start(goal_key=f"k{i}", workspace=f"/w/{i}")
    first = auditor.get("goals", page_size=2).json()
    assert [g["goal_key"] for g in first["results"]] == ["k4", "k3"]
    second = auditor.client.get(first["next"]).json()
    assert [g["goal_key"] for g in second["results"]] == ["k2", "k1"]
    assert [g["goal_key"] for g in auditor.get("goals", workspace="/w/3/").json()["results"]] \
        == ["k3"]
    assert auditor.get("goals", status="done").json()["results"] == []
    assert len(auditor.get("goals", status="running").json()["results"]) == 5
    bad = auditor.get("goals", status="sleeping")
    assert bad.status_code == 400 and "status" in bad.json()["errors"]
    typo = auditor.get("goals", stauts="running")
    assert typo.status_code == 400 and "stauts" in typo.json()["errors"]


def test_a_stale_lease_can_be_taken_over_after_expiry_by_run_goal(agent, clock):
    body = agent.start().json()
    clock.advance(seconds=600 + 60 + timedelta(seconds=1).total_seconds())
    again = agent.start().json()
    assert again["acquired"] is True and again["lease"]["generation"] == 2
    assert again["goal"]["id"] == body["goal"]["id"]


@pytest.mark.django_db(transaction=True)
def test_concurrent_starts_over_the_api_answer_one_goal_per_agent_and_log_no_error(caplog):
    """The expected race through the whole request (an Idempotency-Key's claim,
    then the store's start, in one transaction): several agents start the same
    (workspace, goal_key) at once, some twice. Each agent gets one goal, every
    answer is 201 or 200, and neither PostgreSQL's log nor ours says ERROR
    (or WARNING, here)."""
    import logging
    import threading

    from django.db import connections
    from rest_framework.test import APIClient

    from tests.conftest import Api
    from tests.factories import errors_since, server_log

    callers = [Api(f"racer-{n}", "agent") for n in range(3)]
    body = {"goal_key": "issue-1", "workspace": "/srv/repos/shop", "objective": "Fix it"}
    log = server_log()
    offset = log.stat().st_size if log else 0
    plan = [(caller, f"k-{caller.username}-{i}") for caller in callers for i in range(3)]
    answers: list[tuple[str, int, str]] = []
    barrier = threading.Barrier(len(plan))

    def work(caller: Api, key: str) -> None:
        try:
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {caller.token}")
            barrier.wait()
            response = client.post("/api/v1/goals", body, format="json",
                                   HTTP_IDEMPOTENCY_KEY=key)
            answers.append((caller.username, response.status_code,
                            response.json().get("goal", {}).get("id", "")))
        finally:
            connections.close_all()

    with caplog.at_level(logging.INFO):
        threads = [threading.Thread(target=work, args=step) for step in plan]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    assert len(answers) == len(plan)
    assert sorted(status for _, status, _ in answers) == [200] * 6 + [201] * 3
    goals = {name: {gid for who, _, gid in answers if who == name} for name, _, _ in answers}
    assert all(len(ids) == 1 for ids in goals.values()), goals
    assert len(set().union(*goals.values())) == 3
    assert Goal.objects.filter(goal_key="issue-1").count() == 3
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert errors_since(log, offset) == []


# ------------------------------------------- the checkpoint's time, 100 % when completed, health


def test_the_resume_packet_carries_the_checkpoint_time_not_the_pull_time(agent, clock):
    from ledger.domain.events import iso
    from tests.factories import start_goal

    gid, lease = start_goal(agent)
    agent.post(f"goals/{gid}/checkpoints", {"lease": lease, "current_step": "tests written",
                                            "progress_pct": 40, "release_lease": True})
    written = iso(clock())
    clock.advance(seconds=900)
    assert agent.get(f"goals/{gid}/resume").json()["checkpoint"]["updated_at"] == written
    taken = agent.post(f"goals/{gid}/lease").json()
    assert taken["acquired"]
    assert agent.get(f"goals/{gid}/resume").json()["checkpoint"]["updated_at"] == written
    assert agent.get(f"goals/{gid}/checkpoint").json()["updated_at"] == written
    assert agent.get(f"goals/{gid}").json()["updated_at"] == iso(clock())


def test_a_completed_goal_is_at_100_percent(agent, clock):
    from tests.factories import start_goal

    gid, lease = start_goal(agent)
    agent.post(f"goals/{gid}/checkpoints", {"lease": lease, "current_step": "merged",
                                            "progress_pct": 60})
    done = agent.post(f"goals/{gid}/finish", {
        "lease": lease, "status": "completed", "summary": "merged",
        "evidence": [{"criterion": "CI green", "evidence": "run 7 green"}]})
    assert done.json()["completion_state"] == "completed", done.json()
    assert agent.get(f"goals/{gid}").json()["progress_pct"] == 100
    assert agent.get(f"goals/{gid}/checkpoint").json()["progress_pct"] == 100
    # A failed finish says nothing about progress: it stays where it was.
    failing = agent.start(goal_key="issue-2", workspace="/srv/repos/two")
    lease = lease_of(failing)  # this module's: of a response
    gid = failing.json()["goal"]["id"]
    agent.post(f"goals/{gid}/checkpoints", {"lease": lease, "current_step": "half",
                                            "progress_pct": 50})
    agent.post(f"goals/{gid}/finish", {"lease": lease, "status": "failed", "summary": "no"})
    assert agent.get(f"goals/{gid}").json()["progress_pct"] == 50


@pytest.mark.django_db
def test_health_endpoint(client):
    response = client.get("/api/v1/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"

"""Every call the simulation makes into the product, and nothing else.

The simulation drives the real store and scheduling code on SQLite; this module
is the only place that knows their names and shapes, so a change of the
use cases or the wake semantics is adapted here, in one place. Each function
does what the corresponding API view does (api/views/): call the use case
in ``ledger.services`` (the one that view calls, which runs the domain's
command through the store with its schedule changes and outbox rows in the
same transaction) or ``scheduling.tasks``, or post through the API itself,
and answer a plain value the simulated actors understand. Like every shell,
it imports neither the store nor the domain's commands (tests/test_layers.py);
the ids the world chooses (its goals', its jobs') reach the use cases through
``ledger.services.ids.given``, and the rest they draw come from a seeded
``ids.Seeded`` the world installs (``deterministic``).

A refused command raises :class:`Refused` with the problem code the API would
answer."""

import ast
import contextlib
import hashlib
import json
import logging
import queue
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

from django.conf import settings
from django.db import connection, transaction
from django_q.models import Schedule

from ledger.domain import DomainError, GoalState, LeaseProof, claims, iso, liveness, progress
from ledger.domain.leases import RECONNECT_GRACE  # noqa: F401 (the world reads it here)
from ledger.eventstore import appendsql, clock, projection, tallies
from ledger.models import Event, Goal
from ledger.operators import doctor
from ledger.project.siteurl import api_url
from ledger.services import alerts as ledger_alerts
from ledger.services import goals, ids, jobs, operators, runs, tokens, work
from ledger.services import watchdogs as watchdog_uses
from ledger.services.caller import Caller
from scheduling import sealing, watchdogs

FIRE = watchdogs.FIRE  # the django-q2 func of watchdog and reset schedules
# Housekeeping tasks that change goals (the sweeper, the hourly repair): they
# answer how many they changed.
SWEEP = doctor.SWEEP  # the lease sweeper's func
# A silence of the sweeper longer than this is one the product excuses
# (ledger.services.alerts.unheard_window: two sweep intervals).
SWEEP_SILENCE = timedelta(minutes=2)
GOAL_CHANGING_TASKS = frozenset({doctor.SWEEP, doctor.REPAIR})
DONE_CRITERIA = ("all steps verified",)  # every simulated goal's; a completion shows evidence


class Refused(Exception):
    """The product refused a call (what the API answers as a problem)."""

    def __init__(self, code: str, detail: str = "", **extra: Any):
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail
        self.extra = extra


class Unsupported(Exception):
    """The product has no such operation (yet)."""


@dataclass
class Lease:
    token: str
    generation: int


@dataclass
class LeaseAnswer:
    acquired: bool
    lease: Lease | None = None
    retry_after_seconds: int | None = None
    next_required_action: str | None = None


@dataclass
class ClaimAnswer:
    outcome: str
    lease: Lease | None = None
    retry_after_seconds: int | None = None
    packet: dict[str, Any] | None = None


def _proof(lease: Lease | None) -> LeaseProof | None:
    return tokens.proof({"token": lease.token, "generation": lease.generation} if lease else None)


@contextlib.contextmanager
def _refusals() -> Iterator[None]:
    """A domain refusal as the API answers it: a problem code (Refused)."""
    try:
        yield
    except DomainError as error:
        raise Refused(error.code, error.detail, **error.extra) from None


def _lease_answer(answer: dict[str, Any]) -> LeaseAnswer:
    """The use case's lease answer (what POST /goals and /lease answer) as the
    simulated agents read it."""
    granted = answer.get("lease")
    if granted:
        return LeaseAnswer(True, Lease(str(granted["token"]), int(granted["generation"])))
    return LeaseAnswer(False, None, answer.get("retry_after_seconds"),
                       answer.get("next_required_action"))


def seeded_ids(seed: int) -> contextlib.AbstractContextManager[Any]:
    """The ids and random tokens the use cases draw, seeded: the same every
    run of a seed (an operator wake's occurrence, a host claim's lease)."""
    return ids.use(ids.Seeded(seed * 7919 + 3))


# --------------------------------------------------------------------------- agents


def run_goal(*, goal_id: str, agent: str, workspace: str, goal_key: str, objective: str,
             steps: list[str], policy: dict[str, Any], session_key: str,
             token: str) -> tuple[str, LeaseAnswer]:
    """POST /goals: start (or find) the goal and try to take its lease. The
    world names its goals (seeded), so the use case draws ``goal_id``."""
    with _refusals(), ids.given(goal_id):
        answer = goals.run_goal(
            Caller(agent), token, workspace=workspace, goal_key=goal_key, objective=objective,
            done_criteria=DONE_CRITERIA, next_actions=tuple(steps), policy=policy,
            session={"session_key": session_key}, timeout_seconds=3600,
            estimated_duration_seconds=4 * 3600)
    return answer.state.goal_id, _lease_answer(answer.lease)


def pull(goal_id: str, agent: str, token: str) -> LeaseAnswer:
    """The agent's own call that takes a due wake's lease (POST /goals/{id}/lease)."""
    with _refusals():
        return _lease_answer(goals.acquire(Caller(agent), goal_id, token))


def wake_waiting(state: GoalState, since: str) -> bool:
    """Whether the goal tells its polling agent that a wake is due for it: it is
    ready (pull wakes), or — the pre-issue-9 shape — a wake granted a lease
    "via wake" after ``since`` (when the agent's own last turn ended)."""
    if is_ready(state):
        return True
    wake = state.last_wake
    return wake is not None and wake.outcome == "recurring_acquired" and iso(wake.at) > since


def is_ready(state: GoalState | dict[str, Any]) -> bool:
    """The domain's "ready": a due wake waiting for its agent to pull it
    (``GoalState.ready``, set by a ``ready_for_pull`` claim)."""
    data = state if isinstance(state, dict) else state.to_dict()
    return bool(data.get("ready"))


def heartbeat(goal_id: str, agent: str, lease: Lease) -> None:
    """POST /goals/{id}/lease/heartbeat, through the API."""
    _agent(agent).post(f"goals/{goal_id}/lease/heartbeat", _fenced(lease), _key(goal_id))


def checkpoint(goal_id: str, agent: str, lease: Lease, *, step: str, pct: int,
               next_actions: list[str], release: bool = False, errors: tuple[str, ...] = (),
               note: str = "", wake_in: int | None = None) -> None:
    """POST /goals/{id}/checkpoints, through the API; ``wake_in``: "wake me in N
    seconds" with the release."""
    body: dict[str, Any] = {**_fenced(lease), "current_step": step, "progress_pct": pct,
                            "completed": [step], "next_actions": list(next_actions),
                            "errors": list(errors), "note": note, "release_lease": release}
    if wake_in:
        body["wake"] = {"in_seconds": wake_in, "reason": "timeout_recovery"}
    _agent(agent).post(f"goals/{goal_id}/checkpoints", body, _key(goal_id))


def report_run(goal_id: str, agent: str, lease: Lease, *, error_text: str = "",
               retry_after: str = "", tz: str = "UTC") -> dict[str, Any]:
    """POST /goals/{id}/runs with outcome error: classify, parse the reset, drop the text."""
    with _refusals():
        report = runs.report_run(Caller(agent), goal_id, _proof(lease), outcome="error",
                                 error_text=error_text, timezone=tz, retry_after=retry_after)
    return {"classification": report.classification, "status": report.status,
            "reason": report.reason, "paused_until": report.paused_until or ""}


def request_approval(goal_id: str, agent: str, lease: Lease, gate: str) -> None:
    with _refusals():
        work.request_approval(Caller(agent), goal_id, _proof(lease), gate=gate,
                              summary="needs a human's yes")


def track_job(goal_id: str, agent: str, lease: Lease, *, job_id: str, ref: str,
              notify: bool = False) -> str:
    """POST /goals/{id}/jobs; with ``notify``, the job's notify token (shown
    once). The world names its jobs, so the use case draws ``job_id``."""
    with _refusals(), ids.given(job_id):
        tracked = jobs.track(Caller(agent), goal_id, _proof(lease), kind="ci", ref=ref, link="",
                             notify=notify)
    return tracked.notify_token or "tracked"


def notify_job(goal_id: str, job_id: str, token: str, status: str) -> None:
    """What CI's last step does: POST /jobs/{job_id}/status with the job's token."""
    with _refusals():
        jobs.notify(token, job_id, status=status, conclusion=status, link="")


def release(goal_id: str, agent: str, lease: Lease) -> None:
    with _refusals():
        work.release(Caller(agent), goal_id, _proof(lease), None, api_url=api_url())


def update_job(goal_id: str, agent: str, lease: Lease, *, job_id: str, status: str) -> None:
    with _refusals():
        jobs.update(Caller(agent), goal_id, _proof(lease), job_id, status=status,
                    conclusion=status)


def prepare_watchdog(goal_id: str, agent: str, lease: Lease) -> dict[str, Any]:
    """POST /goals/{id}/watchdog; for a host watchdog, the schedule the host must create."""
    with _refusals():
        answer = watchdog_uses.ensure(Caller(agent), goal_id, _proof(lease), tzid="UTC",
                                      api_url=api_url())
    watchdog = answer.state.watchdog
    return watchdog.stored() if watchdog is not None else {}


def host_receipt(goal_id: str, agent: str, lease: Lease | None, *, status: str,
                 host_ref: str = "", due_at: str = "") -> str:
    """POST /goals/{id}/watchdog/receipts, through the API; answers the
    completion state. A 4xx (e.g. a due_at far from the prepared slot) is
    Refused: the agent must fix what it sent."""
    body: dict[str, Any] = {**_fenced(lease), "status": status,
                            "runs_on": "local" if status == "created" else "unverified"}
    if host_ref:
        body["host_ref"] = host_ref
    if due_at:
        body["due_at"] = due_at
    if status == "user_attested_deleted":
        body["attested_by"] = agent
    answer = _agent(agent).post(f"goals/{goal_id}/watchdog/receipts", body, _key(goal_id))
    return str(answer["completion_state"])


def finish(goal_id: str, agent: str, lease: Lease, status: str = "completed") -> str:
    """POST /goals/{id}/finish, through the API; answers completed,
    pending_native_cleanup, … A completion shows evidence for the goal's one
    done criterion."""
    evidence = ([{"criterion": c, "evidence": "every step checkpointed and verified"}
                 for c in DONE_CRITERIA] if status == "completed" else [])
    answer = _agent(agent).post(f"goals/{goal_id}/finish",
                                {**_fenced(lease), "status": status, "summary": "done",
                                 "evidence": evidence}, _key(goal_id))
    return str(answer["completion_state"])


def host_claim(goal_id: str, agent: str, token: str,
               occurrence_id: str | None) -> ClaimAnswer:
    """POST /goals/{id}/claim as a host-fired task sends it, through the API
    (without an occurrence id, the domain names the claim after its slot).
    The Idempotency-Key is a UUID made from the world's ``token``: the server
    derives the lease token it grants from it (and refuses keys that look
    like credentials)."""
    body = {"occurrence_id": occurrence_id} if occurrence_id else {}
    key = str(uuid.UUID(hashlib.sha256(token.encode()).hexdigest()[:32]))
    answer = _agent(agent).post(f"goals/{goal_id}/claim", body, key)
    granted = answer.get("lease") or None
    lease = Lease(str(granted["token"]), int(granted["generation"])) if granted else None
    return ClaimAnswer(str(answer["outcome"]), lease, answer.get("retry_after_seconds"),
                       answer.get("resume_packet"))


# --------------------------------------------------------------------------- operators


def _act(act: str, goal_id: str, operator: str, reason: str,
         gate: str = "") -> operators.Acted:
    """What the operator views, the admin and ``ledger stop|…`` all call."""
    with _refusals():
        return operators.act(act, goal_id, operator=operator, reason=reason, gate=gate)


def resolve_approval(goal_id: str, operator: str, gate: str, decision: str) -> None:
    _act(decision, goal_id, operator, "looked at it", gate)


def recover(goal_id: str, operator: str, reason: str) -> None:
    _act("recover", goal_id, operator, reason)


def stop(goal_id: str, operator: str, reason: str) -> None:
    _act("stop", goal_id, operator, reason)


def wake_now(goal_id: str, operator: str, reason: str) -> str:
    """POST /goals/{id}/wake: an operator ends a pause early."""
    return _act("wake", goal_id, operator, reason).claim.outcome


# --------------------------------------------------------------------------- scheduler


@dataclass(frozen=True)
class ScheduleRow:
    """A django-q2 Schedule row of ours, as the scheduler sees it."""

    pk: int
    name: str
    args: tuple[Any, ...]
    schedule_type: str
    minutes: int | None
    next_run: datetime
    repeats: int

    @property
    def goal_id(self) -> str:
        return str(self.args[0]) if self.args else ""

    @property
    def once(self) -> bool:
        return self.schedule_type == Schedule.ONCE


def schedules(*, goal_id: str | None = None,
              due_before: datetime | None = None) -> list[ScheduleRow]:
    """The watchdog and reset schedules the code wrote (not the sweeper's): all,
    one goal's, or those django-q2 would pick up now (next_run before ``due_before``)."""
    query = Schedule.objects.filter(func=FIRE).exclude(repeats=0)
    if goal_id is not None:
        query = query.filter(args=repr(str(goal_id)))
    if due_before is not None:
        query = query.filter(next_run__lt=due_before)
    rows = []
    for pk, name, raw, kind, minutes, next_run, repeats in query.order_by(
            "next_run", "pk").values_list("pk", "name", "args", "schedule_type", "minutes",
                                          "next_run", "repeats"):
        args = ast.literal_eval(raw) if raw else ()
        if not isinstance(args, tuple):  # django-q2: a single value is one argument
            args = (args,)
        rows.append(ScheduleRow(pk, name or "", args, kind, minutes, next_run, repeats))
    return rows


# Event kinds whose commands change django-q2 rows (scheduling.watchdogs.apply,
# run by the store):
# the simulation re-reads the schedules after one of them.
SCHEDULE_KINDS = frozenset({"wake.scheduled", "receipt.recorded", "goal.completed",
                            "goal.failed", "goal.blocked", "goal.stopped"})


# ------------------------------------------------------------- django-q2 itself


@contextlib.contextmanager
def _django_q_time() -> Iterator[None]:
    """django-q2 reads ``django.utils.timezone.now``: pinned to the simulated
    clock. Its scheduler would also close "old" connections, which in the
    world's one rolled-back transaction means the connection itself, and its
    broker sleeps a second of real time on an empty queue."""
    from django_q import scheduler as q_scheduler
    from django_q.brokers import orm as q_orm

    with mock.patch("django.utils.timezone.now", lambda: clock.now()), \
            mock.patch.object(q_scheduler, "close_old_django_connections", lambda: None), \
            mock.patch.object(q_orm, "sleep", lambda _seconds: None):
        yield


def rewind_housekeeping(start: datetime) -> None:
    """The rows `migrate` created (the lease sweeper, the hourly repair, the
    prune, the seal) are due from the world's first instant, not from the real
    day the test database was made. The seal runs hourly here: signing a head
    every minute was 40 % of a world's time, and the verifiable log has its own
    tests."""
    Schedule.objects.exclude(func=FIRE).update(next_run=start)
    Schedule.objects.filter(name=sealing.SEAL_NAME).update(minutes=60)


def anything_due() -> bool:
    """Whether django-q2's scheduler pass would find a due row (its own filter)."""
    return Schedule.objects.exclude(repeats=0).filter(next_run__lt=clock.now()).exists()


def run_scheduler() -> int:
    """One pass of django-q2's own scheduler (django_q/scheduler.py) at the
    simulated time: every due schedule row becomes a task in the ORM broker's
    queue (OrmQ), its next_run moved on or the ONCE row deleted, as in
    production. Answers how many tasks wait in the queue."""
    from django_q.brokers import get_broker
    from django_q.scheduler import scheduler

    broker = get_broker()
    with _django_q_time():
        scheduler(broker)
        return broker.queue_size()


def take_tasks() -> list[dict[str, Any]]:
    """What a cluster's pusher does: dequeue every ready task from the ORM
    broker. The task dicts are django-q2's own, with the broker's ``ack_id``:
    django-q2 acknowledges a task after it ran (the monitor), so a task whose
    worker never reports back is handed out again after the cluster's
    ``retry`` seconds."""
    from django_q.brokers import get_broker
    from django_q.signing import SignedPackage

    broker = get_broker()
    tasks_taken = []
    with _django_q_time():
        while True:
            got = broker.dequeue()
            if not got:
                return tasks_taken
            for ack, payload in got:
                tasks_taken.append({**SignedPackage.loads(payload), "ack_id": ack})


def cluster_retry_seconds() -> int:
    """The cluster's ``retry``: how long a taken, unacknowledged task stays hidden."""
    return int(settings.Q_CLUSTER["retry"])


def tasks_in_flight() -> int:
    """Tasks in the ORM broker's queue, taken or not (a taken task that was
    never acknowledged becomes visible again after the cluster's ``retry``)."""
    from django_q.brokers import get_broker

    return get_broker().queue_size() + get_broker().lock_size()


@dataclass
class TaskRun:
    success: bool
    result: Any  # the function's answer, or django-q2's "error : traceback" text


def run_task(task: dict[str, Any]) -> TaskRun:
    """django-q2's worker (django_q/worker.py) runs one task in process, not in
    sync mode: it locates the function by name and calls it; an exception is
    caught and becomes a failed result. Then what the cluster's monitor does
    (django_q/monitor.py): a failure is saved as a Task with success=False
    (attempt_count counted) and acknowledged only if the cluster acks
    failures (``ack_failures``) or its attempts are spent; otherwise the
    broker hands it out again after ``retry``. A success is acknowledged
    without saving its result row (django-q2 keeps up to ``save_limit`` of
    them; keeping them here costs a locked scan of the Success table per task
    and shows nothing the ledger's events do not)."""
    from multiprocessing import Value

    from django_q import monitor as q_monitor
    from django_q import worker as q_worker
    from django_q.brokers import get_broker

    todo: queue.Queue[Any] = queue.Queue()
    done: queue.Queue[Any] = queue.Queue()
    todo.put(task)
    todo.put("STOP")
    broker = get_broker()
    # Not sync: the worker would close "old" connections, which in the world's
    # one rolled-back transaction means the connection itself.
    with _django_q_time(), \
            mock.patch.object(q_worker, "close_old_django_connections", lambda: None), \
            mock.patch.object(q_monitor, "close_old_django_connections", lambda: None):
        q_worker.worker(todo, done, Value("f", -1))
        ran = done.get_nowait()
        if ran["success"]:
            if ran.get("ack_id"):
                broker.acknowledge(ran["ack_id"])
        else:
            results: queue.Queue[Any] = queue.Queue()
            results.put(ran)
            results.put("STOP")
            # The monitor logs each failure with its traceback at ERROR: the
            # world counts them instead (Report.task_failures).
            muted = logging.root.manager.disable
            logging.disable(logging.ERROR)
            try:
                q_monitor.monitor(results, broker)  # type: ignore[arg-type]
            finally:
                logging.disable(muted)
    return TaskRun(bool(ran["success"]), ran["result"])


def failed_tasks() -> list[tuple[str, str, int]]:
    """django-q2's failures (Task rows with success=False): (func, first
    argument, attempts)."""
    from django_q.models import Task

    rows = []
    for func, args, attempts in Task.objects.filter(success=False).values_list(
            "func", "args", "attempt_count"):
        rows.append((str(func), str(args[0]) if args else "", int(attempts)))
    return rows


def load(goal_id: str) -> GoalState:
    """The projected state (what GET /goals/{id} reads). Plain SQL: the simulation
    reads after every step, and the ORM's query building would cost more than
    the product's own work."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT state FROM {Goal._meta.db_table} WHERE id = %s",
                       [_pk(goal_id)])
        row = cursor.fetchone()
    if row is None:
        raise Refused("not_found", f"no goal {goal_id}")
    return GoalState.from_dict(_json(row[0]))


def _pk(goal_id: str) -> Any:
    return Goal._meta.pk.get_db_prep_value(uuid.UUID(str(goal_id)), connection)


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


def load_many(goal_ids: list[str]) -> dict[str, GoalState]:
    return {str(pk): GoalState.from_dict(state)
            for pk, state in Goal.objects.filter(pk__in=goal_ids).values_list("id", "state")}


def events(goal_id: str, after: int = 0) -> list[dict[str, Any]]:
    """A goal's events after ``after`` in seq order (GET /goals/{id}/events)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT seq, kind, data, actor, recorded_at FROM "
                       f"{Event._meta.db_table} WHERE goal_id = %s AND seq > %s ORDER BY seq",
                       [_pk(goal_id), after])
        rows = cursor.fetchall()
    return [{"seq": seq, "kind": kind, "data": _json(data), "actor": actor,
             "recorded_at": _moment(at)} for seq, kind, data, actor, at in rows]


def _moment(value: Any) -> datetime:
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def replay_differences(goal_ids: list[str]) -> dict[str, list[str]]:
    """ledger/projection.py replay: goal -> fields whose replay differs from the projection."""
    return {report.goal_id: [d.field for d in report.differences]
            for report in projection.replay(goal_ids)}


def broken_chains(goal_ids: list[str]) -> dict[str, str]:
    """ledger/projection.py verify: goal -> the first broken link."""
    return {report.goal_id: str(report.broken) for report in projection.verify(goal_ids)
            if report.broken is not None}


def tally_drift() -> dict[str, str]:
    """ledger/eventstore/tallies.py drift: each goals-by-status tally (what
    /metrics reports) that a COUNT of the goal table disagrees with."""
    return {f"{name} {label}": f"tallied {tallied:g}, counted {counted:g}"
            for (name, label), (tallied, counted) in tallies.drift().items()}


def stale_at(state: GoalState) -> datetime | None:
    from ledger.domain import lease_stale_at

    return lease_stale_at(state)


def jobs_to_inspect(state: GoalState) -> list[dict[str, Any]]:
    """Running jobs without a notify token: a resumed agent inspects and
    reports them (the resume packet's ``jobs_to_inspect``)."""
    return [job for job in state.running_jobs() if not job.get("notify_sha256")]


# --------------------------------------------------------------------------- liveness


def deadline(state: GoalState) -> datetime | None:
    """The product's claim: by when the goal's next evidence must arrive."""
    return liveness.expectation(state).deadline


def label(state: GoalState) -> str:
    return liveness.label(state, clock.now())


def attention(state: GoalState) -> str:
    return liveness.attention(state)


def delete_sweeper_row() -> bool:
    """An admin deletes the lease sweeper's django-q2 row (the hourly repair
    restores it)."""
    return Schedule.objects.filter(name=doctor.SWEEPER_NAME).delete()[0] > 0


def damage_row(goal_id: str, how: str) -> bool:
    """An operator (an admin page, a restore, hand-written SQL) deletes the
    goal's watchdog row or exhausts it (repeats 0, which django-q2 skips
    without deleting). Whether there was a row to damage."""
    rows = Schedule.objects.filter(name=watchdogs.schedule_name(goal_id))
    if how == "delete":
        return rows.delete()[0] > 0
    return rows.update(repeats=0) > 0


# --------------------------------------------------------------------------- the API over HTTP


class Api:
    """A caller of the REST API with a real bearer token the product issued
    (``ledger.access.accounts.issue_token``, as tests/conftest.py's ``Api``), through
    Django's test client: authentication, the role's visibility and the
    serializer are the product's own."""

    def __init__(self, username: str, role: str):
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Group
        from django.test import Client

        from ledger.access import accounts

        user, _ = get_user_model().objects.get_or_create(username=username)
        user.groups.add(Group.objects.get_or_create(name=role)[0])
        self.client = Client(HTTP_AUTHORIZATION=f"Bearer {accounts.issue_token(user)}")

    def get(self, url: str) -> Any:
        return self._answer(self.client.get(url))

    def post(self, path: str, body: dict[str, Any], key: str) -> Any:
        """A write with an Idempotency-Key (the world's own, from its seed: the
        lease token the server derives from it is then the same every run)."""
        return self._answer(self.client.post(f"/api/v1/{path}", body,
                                             content_type="application/json",
                                             HTTP_IDEMPOTENCY_KEY=key))

    @staticmethod
    def _answer(response: Any) -> Any:
        body = response.json() if response.content else {}
        if response.status_code >= 400:
            # A problem (4xx): the agent must do something else.
            raise Refused(str(body.get("code", response.status_code)), str(body.get("detail", "")),
                          status=response.status_code)
        return body


@contextlib.contextmanager
def quiet_requests() -> Iterator[None]:
    """Django logs every 4xx the agents meet (lease_lost, a refused receipt) as a
    warning: the world notes them on the goal's trace instead."""
    logger = logging.getLogger("django.request")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


_AGENTS: dict[str, Api] = {}


def new_world() -> None:
    """Forget the API callers of an earlier world (its rolled-back users)."""
    _AGENTS.clear()
    _calls[0] = 0


def _agent(name: str) -> Api:
    """The agent's caller: a user named as the goal's agent, with its own token."""
    if name not in _AGENTS:
        _AGENTS[name] = Api(name, "agent")
    return _AGENTS[name]


def _fenced(lease: Lease | None) -> dict[str, Any]:
    return {"lease": {"token": lease.token, "generation": lease.generation}} if lease else {}


_calls = [0]  # writes this world made through the API


def _key(goal_id: str) -> str:
    """An Idempotency-Key: unique per call, the same sequence every run."""
    _calls[0] += 1
    return f"sim-{goal_id[:8]}-{_calls[0]}"


@dataclass
class AlertsRead:
    """Every page of GET /alerts: goal -> reason, the pages read, and the
    total the first page announced (None while /alerts answers a bare list)."""

    reasons: dict[str, str]
    rows: int
    pages: int
    count: int | None


ALERTS_URL = "/api/v1/alerts"
_MAX_PAGES = 10_000  # a cursor that never ends is a product bug, not a long list


def read_alerts(api: Api) -> AlertsRead:
    """GET /alerts as a dashboard reads it, every page: a JSON list (one page,
    the shape before it was paged), or a page ``{"count", "next", "previous",
    "results"}`` whose ``next`` is followed to the end. Reasons are read as
    given, whatever their names."""
    reasons: dict[str, str] = {}
    url: str | None = ALERTS_URL
    rows = pages = 0
    count: int | None = None
    while url:
        body = api.get(url)
        pages += 1
        if isinstance(body, list):
            results, url = body, None
        else:
            results, url = body["results"], body.get("next")
            if pages == 1:
                count = body.get("count")
        rows += len(results)
        for row in results:
            reasons.setdefault(str(row["id"]), str(row["reason"]))
        if pages > _MAX_PAGES:
            raise RuntimeError(f"/alerts still has a next page after {_MAX_PAGES} pages")
    return AlertsRead(reasons, rows, pages, count)


# --------------------------------------------------------------------------- planted faults


class DatabaseDown(Exception):
    """Raised for the world by ``database_down`` (django.db.OperationalError)."""


_PASS_THROUGH = ("SAVEPOINT", "RELEASE", "ROLLBACK")


@contextlib.contextmanager
def database_down() -> Iterator[None]:
    """The database is unreachable: every query of whoever runs inside raises
    ``django.db.OperationalError`` before it reaches the database. Savepoint
    statements pass, so the step's savepoint unwinds as a dropped connection
    would, and the world's one transaction stays usable."""
    from django.db import OperationalError

    def refuse(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if str(sql).lstrip().upper().startswith(_PASS_THROUGH):
            return execute(sql, params, many, context)
        raise OperationalError("simulated: the database is unreachable")

    muted = logging.root.manager.disable
    logging.disable(logging.ERROR)  # django.request's "Internal Server Error" per refused call
    refused: BaseException | None = None
    # The store appends through the driver's own cursor on SQLite, past
    # Django's execute wrappers: during the outage it appends through Django's
    # cursor (its reference recorder), refused like every other statement.
    # And the step runs in a savepoint: a product transaction joins the
    # world's one without a savepoint of its own, so a command refused part
    # way must be undone here as a dropped connection undoes it. (Without
    # both, an operator's wake kept its lease grant and lost its outbox row:
    # a dispatch never sent, then INTERRUPTED_UNKNOWN.)
    django_recorder = {connection.vendor: appendsql.DjangoRecorder()}
    try:
        with mock.patch.dict(appendsql._RECORDERS, django_recorder), \
                connection.execute_wrapper(refuse), transaction.atomic():
            yield
    except BaseException as error:
        refused = error
        raise
    finally:
        logging.disable(muted)
        # An ORM write outside any savepoint (an update, a delete) marks the
        # enclosing atomic block broken when it raises. Here that block is the
        # world's own rolled-back transaction, which production does not have,
        # and the statement never reached the database: nothing to roll back.
        # Django records the error only for some writes (rollback_exc); a
        # delete's own atomic(savepoint=False) marks the block without it.
        if connection.needs_rollback and (
                is_database_down(connection.rollback_exc)
                or (refused is not None and is_database_down(refused))):
            connection.needs_rollback = False


def is_database_down(error: BaseException) -> bool:
    from django.db import OperationalError

    return isinstance(error, OperationalError) and "simulated" in str(error)


POISON_TEXT = "simulated poisoned wake"


@contextlib.contextmanager
def planted(faults: tuple[str, ...], poisoned: set[str]) -> Iterator[None]:
    """Bugs a world may plant in the product, to show its figures catch them:

    * ``sweeper_off``: the minutely lease sweeper does nothing;
    * ``repair_off``: the hourly schedule repair does nothing;
    * ``overdue_unlisted``: /alerts never lists a goal OVERDUE (the read-time
      listing of a passed deadline is lost);
    * ``host_silent_early``: a host goal's HOST_SILENT deadline comes
      ``host_silent_slots`` intervals early (half an interval before its
      next slot), so a host firing on schedule is listed between its fires;
    * ``progress_by_activity``: the progress rule before progress meant
      evidence (``activity_is_progress``): any checkpoint, lease grant and
      job end restarts the progress clock, and empty turns stop no wake;
    * ``long_pause_unlisted``: a pause to a reset days away is never listed
      LONG_PAUSE (only the continuation budget ends it);
    * ``backlog_counted``: every queued fire of a stalled cluster is a claim
      of its own (none is collapsed into the one that stood for its slot);
    * and, whatever the faults, the wake task raises for every goal id in
      ``poisoned`` (a set the world fills as it starts goals): django-q2
      records each run as a failed task.
    """
    from scheduling import maintenance
    from scheduling import tasks as q_tasks

    fire = q_tasks.fire_watchdog

    def poisoned_fire(goal_id: str, *args: Any, **kwargs: Any) -> Any:
        if str(goal_id) in poisoned:
            raise RuntimeError(f"{POISON_TEXT} for goal {goal_id}")
        return fire(goal_id, *args, **kwargs)

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(q_tasks, "fire_watchdog", poisoned_fire))
        faults = stack.enter_context(clock_faults(faults))
        if "sweeper_off" in faults:
            stack.enter_context(mock.patch.object(q_tasks, "sweep_leases", lambda: 0))
        if "repair_off" in faults:
            stack.enter_context(mock.patch.object(maintenance, "repair_schedules",
                                                  lambda *a, **k: 0))
        if "overdue_unlisted" in faults:
            # Only /alerts' query loses its second half (a passed deadline):
            # the sweeper and the doctor keep their own reading of OVERDUE.
            def attention_only(goals: Any, now: datetime) -> Any:
                return goals.exclude(attention="")

            stack.enter_context(mock.patch.object(ledger_alerts, "needing_a_human",
                                                  attention_only))
        if "host_silent_early" in faults:
            host_expectation = liveness.host_expectation

            def early(state: GoalState) -> liveness.Expectation:
                expected = host_expectation(state)
                if expected.deadline is None:
                    return expected
                silence = state.setting("host_silent_slots") * timedelta(
                    seconds=state.interval_seconds)
                return replace(expected, deadline=expected.deadline - silence)

            stack.enter_context(mock.patch.object(liveness, "host_expectation", early))
        if "progress_by_activity" in faults:
            stack.enter_context(activity_is_progress())
        if "long_pause_unlisted" in faults:
            stack.enter_context(mock.patch.object(liveness, "pause_expectation",
                                                  lambda *args, **kwargs: None))
        if "backlog_counted" in faults:
            stack.enter_context(mock.patch.object(claims, "superseded",
                                                  lambda *args, **kwargs: False))
        unknown = set(faults) - {"sweeper_off", "repair_off", "overdue_unlisted",
                                 "host_silent_early", "progress_by_activity",
                                 "long_pause_unlisted", "backlog_counted"}
        if unknown:
            raise ValueError(f"unknown planted faults: {sorted(unknown)}")
        yield


# --------------------------------------------------------------------------- a stepped clock

CLOCK_TRUSTED = "clock_step_trusted"


@contextlib.contextmanager
def clock_faults(faults: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """``clock_step_trusted`` (the product before ledger.domain.clocksteps):
    every command is recorded at the goal's last event however far that lies
    ahead, stamps from the future are never brought back, and a goal stamped
    ahead is listed by its deadlines alone. Yields the other faults, for
    ``planted``."""
    from django.db.models import Q

    from ledger.domain import clocksteps

    with contextlib.ExitStack() as stack:
        if CLOCK_TRUSTED in faults:
            def trusted(state: GoalState, now: datetime) -> datetime:
                last = state.updated_at if state.updated_at else now
                return max(last, now)

            stack.enter_context(mock.patch.object(clocksteps, "recording_time", trusted))
            stack.enter_context(mock.patch.object(clocksteps, "stepped_back",
                                                  lambda state, now: []))
            stack.enter_context(mock.patch.object(clocksteps, "ahead_by",
                                                  lambda state, now: None))
            stack.enter_context(mock.patch.object(
                ledger_alerts, "_overdue",
                lambda now: Q(deadline_at__lt=liveness.overdue_cutoff(now))))
        yield tuple(fault for fault in faults if fault != CLOCK_TRUSTED)


def notify_watch() -> str:
    """One pass of the notification watch (`ledger notify --every 60`, the
    Procfile's `watch`), the scheduler's standing only: the process other than
    the scheduler that tells its silence and restores its rows. django-q2's
    rows are judged by django-q2's clock, the simulated one."""
    from ledger.services import notifications

    with _django_q_time():
        return notifications.scheduler_standing()

@contextlib.contextmanager
def activity_is_progress() -> Iterator[None]:
    """The progress rule as it was before it meant evidence (planted): every
    checkpoint is progress, each lease grant restarts a holder's clock, each
    job end restarts it and every running job suspends it, and turns that
    end empty never stop a wake."""

    def job_ended(state: GoalState, at: str) -> dict[str, Any]:
        return {"since_progress": progress.counted(state, progress.JOBS), "progress_since": at}

    def from_the_grant(since: datetime, grant: datetime, bound: timedelta,
                       unleased: datetime) -> datetime:
        return max(since, grant) + bound

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(progress, "advances",
                                              lambda state, data: progress.fingerprint(data)))
        stack.enter_context(mock.patch.object(progress, "job_ended", job_ended))
        stack.enter_context(mock.patch.object(progress, "waited_on_jobs", lambda state: False))
        stack.enter_context(mock.patch.object(progress, "empty_turns", lambda state: 0))
        stack.enter_context(mock.patch.object(liveness, "holding_deadline", from_the_grant))
        yield


# --------------------------------------------------------------------------- push dispatch

PUSH = "sim-push"  # the world's webhook dispatcher (a goal's policy.dispatch)
_PUSH_SECRET = "sim-webhook-secret"


@contextlib.contextmanager
def push_dispatcher(receive: Callable[[dict[str, Any]], bool]) -> Iterator[None]:
    """A webhook dispatcher configured as operators do (WAKELEDGER_DISPATCHERS,
    validated by scheduling.dispatch), whose one POST reaches the world's agent
    instead of a socket: the outbox builds, signs and records the dispatch as
    in production (scheduling/outbox.py, from the wake task or the sweeper, on
    django-q2's worker path); ``receive`` gets the JSON body (goal_id,
    occurrence_id, resume_packet, lease) and answers whether it took it."""
    from django.test import override_settings

    from scheduling import dispatch
    from scheduling.signatures import verify_signature

    spec = {"type": "webhook", "url": "http://127.0.0.1:9/sim-agent", "secret": _PUSH_SECRET,
            "timeout": 5}

    def deliver(url: str, body: bytes, headers: dict[str, str], timeout: float) -> Any:
        if not verify_signature(_PUSH_SECRET, headers.get(dispatch.SIGNATURE_HEADER), body):
            return dispatch.Result(False, "401")  # a receiver refuses an unsigned body
        taken = receive(json.loads(body))
        return dispatch.Result(taken, "200" if taken else "503")

    with override_settings(WAKELEDGER_DISPATCHERS={PUSH: spec}), \
            mock.patch.object(dispatch, "_send", deliver):
        dispatch.validate({PUSH: spec})
        yield

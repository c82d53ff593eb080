"""Factories that build goals the only legitimate way: through store commands.

A Goal row made with ``Goal.objects.create`` would be a projection of no
events; these go through ``store.start`` / ``store.execute`` so the event
history and the projection always agree.
"""

import hashlib
import secrets
import uuid
from pathlib import Path

import factory
from django.db import connection

from ledger.domain import Finish, GoalState, LeaseProof, RecordCheckpoint, RunGoal, StartGoal
from ledger.domain.commands import Evidence
from ledger.eventstore import store
from ledger.models import Event, Goal


def new_token() -> tuple[str, str]:
    """A raw lease token and its digest, as the API makes them."""
    raw = secrets.token_urlsafe(32)
    return raw, hashlib.sha256(raw.encode()).hexdigest()


# A completed finish's body for the API goal tests start (`Api.start` in
# conftest: one done criterion, "CI green").
COMPLETED = {"status": "completed", "summary": "merged; CI green",
             "evidence": [{"criterion": "CI green", "evidence": "ci run 7: 212 passed"}]}


def evidence_for(state: GoalState) -> tuple[Evidence, ...]:
    """Evidence for each of the goal's done criteria, as a completed finish needs."""
    return tuple(Evidence(c, f"checked: {c}") for c in dict.fromkeys(state.done_criteria))


def completed(state: GoalState, summary: str = "done") -> Finish:
    """A completed finish by the current holder, with its summary and evidence."""
    return Finish("completed", summary, proof_of(state), evidence_for(state))


def proof_of(state: GoalState) -> LeaseProof:
    """The current holder's proof. Tests may build it from the stored digest;
    real callers only have the raw token and hash it."""
    return LeaseProof(state.lease.token_sha256, state.lease.generation)


class GoalFactory(factory.Factory):
    class Meta:
        model = StartGoal

    goal_id = factory.LazyFunction(lambda: str(uuid.uuid4()))
    workspace = factory.Sequence(lambda n: f"/srv/repos/project-{n}")
    goal_key = factory.Sequence(lambda n: f"issue-{n}")
    objective = factory.Faker("sentence", nb_words=8)
    done_criteria = ("tests pass", "PR opened")
    next_actions = ("read the issue", "write a failing test")
    agent = "agent-1"

    @classmethod
    def _create(cls, model_class, *args, checkpoints: int = 0, finish: str | None = None,
                leased: bool = True, **kwargs) -> Goal:
        command = model_class(**kwargs)
        actor = command.agent or "agent-1"
        if leased:
            outcome = store.start(RunGoal(command, actor, new_token()[1]), actor=actor)
        else:
            outcome = store.start(command, actor=actor)
        state = outcome.state
        for step in range(1, checkpoints + 1):
            state = store.execute(state.goal_id, RecordCheckpoint(
                current_step=f"step {step}",
                progress_pct=min(100, step * 10),
                completed=(f"did step {step}",),
                next_actions=(f"step {step + 1}",),
                proof=proof_of(state),
            ), actor=actor).state
        if finish:
            evidence = evidence_for(state) if finish == "completed" else ()
            store.execute(state.goal_id, Finish(status=finish, summary="finished",
                                                proof=proof_of(state), evidence=evidence),
                          actor=actor)
        return Goal.objects.get(pk=state.goal_id)


def lease_of(body: dict) -> dict:
    """The lease proof a fenced call carries, from an API answer that granted one."""
    return {"token": body["lease"]["token"], "generation": body["lease"]["generation"]}


def start_goal(agent, **policy) -> tuple[str, dict]:
    """Start ``agent``'s goal through the API (``Api.start`` in conftest) with a
    300 s lease and ``policy``: its id and the lease proof."""
    body = agent.start(policy={"lease_seconds": 300, **policy}).json()
    return body["goal"]["id"], lease_of(body)


# Instants at the edges of what a datetime holds, in several offsets: a time
# field given one is recorded and read back, or refused as a problem, never a 500.
EXTREME_INSTANTS = ["0001-01-01T00:00:00Z", "0999-06-01T12:00:00+00:00",
                    "0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00",
                    "9999-12-31T23:59:59.999999Z"]


def kinds(goal_id: str) -> list[str]:
    """A stored goal's event kinds, in order."""
    return list(Event.objects.filter(goal_id=goal_id).order_by("seq")
                .values_list("kind", flat=True))


# ---------------------------------------------------------- PostgreSQL's own log


def server_log() -> Path | None:
    """PostgreSQL's own log, which tests/postgres.py (and bench/soak.py) write
    beside the data directory; None on SQLite or a server started otherwise."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SHOW data_directory")
        log = Path(cursor.fetchone()[0]).parent / "server.log"
    return log if log.is_file() else None


def errors_since(log: Path | None, offset: int) -> list[str]:
    if log is None:
        return []
    with open(log, "rb") as handle:
        handle.seek(offset)
        return [line for line in handle.read().decode(errors="replace").splitlines()
                if "ERROR:" in line]

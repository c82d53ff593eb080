"""Seeded random goal histories, and their goal rows as the store keeps them.

``tests/domain/stored_states.json`` holds, for each seed, the events of one
history (as the event store records them: kind, encoded payload, time) and
the goal row's JSON text after them (``json.dumps(state.to_stored())``),
captured from the code that kept the state's parts as dicts and its times as
ISO strings. tests/domain/test_state_values.py folds the same events with
the current code and asserts the same text: the typed state must store
exactly what the untyped one did. The second test there decides the same
seeds again: a deliberate change to what a command decides regenerates the
file (``python -m tests.domain.stored_histories``), never a change to how a
state is kept or stored, which must leave every row as it is.
"""

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ledger.domain import (
    AcquireLease,
    Artifact,
    DomainError,
    Finish,
    GoalState,
    Heartbeat,
    LeaseProof,
    RecordCheckpoint,
    ReleaseLease,
    RunGoal,
    StartGoal,
    decide,
    evolve,
)
from ledger.domain.claims import ClaimWake, WakeNow
from ledger.domain.codec import encode
from ledger.domain.commands import Evidence, WakeRequest
from ledger.domain.continuations import HostContinued
from ledger.domain.events import iso
from ledger.domain.jobs import TrackJob, UpdateJob
from ledger.domain.overdue import CheckLiveness
from ledger.domain.runs import Recover, ReportRun, RequestApproval, ResolveApproval, Stop
from ledger.domain.watchdogs import PrepareWatchdog, RecordReceipt

FIXTURE = Path(__file__).with_name("stored_states.json")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
TOKENS = ["a" * 64, "b" * 64, "c" * 64]
CRITERIA = ("tests pass",)
SEEDS = range(60)
EVERY = 4  # a stored state after every fourth event


def _start(rng: random.Random) -> StartGoal:
    policy: dict[str, Any] = {"scheduler": rng.choice(["internal", "host"])}
    session = {"session_key": "agent:main:k", "timezone": "Europe/Paris"} \
        if rng.random() < 0.5 else {}
    return StartGoal(goal_id="g", workspace="/w", goal_key="k", objective="o",
                     done_criteria=CRITERIA, next_actions=("look",), agent="agent-1",
                     policy=policy, session=session)


def _command(rng: random.Random, state: GoalState, now: datetime) -> Any:
    lease = state.lease
    proof = None if not lease else LeaseProof(_field(lease, "token_sha256"),
                                              _field(lease, "generation"))
    if proof is not None and rng.random() < 0.05:
        proof = LeaseProof(proof.token_sha256, proof.generation - 1)
    due = iso(now + timedelta(hours=1))
    choices = [
        lambda: RecordCheckpoint(current_step=rng.choice(["a", "b", "c"]),
                                 progress_pct=rng.randint(0, 100),
                                 next_actions=(rng.choice(["x", "y"]),),
                                 artifacts=(Artifact("a.txt", rng.choice("01") * 64, 3),)
                                 if rng.random() < 0.3 else (),
                                 note="back", release_lease=rng.random() < 0.3, proof=proof,
                                 wake=None),
        lambda: RecordCheckpoint(current_step="w", progress_pct=50, release_lease=True,
                                 proof=proof, wake=WakeRequest(in_seconds=900,
                                                               reason="dependency_ready")),
        lambda: AcquireLease("agent-1", rng.choice(TOKENS)),
        lambda: Heartbeat(proof),
        lambda: ReleaseLease(proof, WakeRequest(in_seconds=1800) if rng.random() < 0.3
                             else None),
        lambda: PrepareWatchdog(proof, 3600, "UTC", "wd-g"),
        lambda: RecordReceipt(proof, rng.choice(["created", "created", "create_failed",
                                                 "create_uncertain", "cancelled"]),
                              host_ref_sha256="d" * 64, due_at=due, runs_on="local"),
        lambda: ClaimWake(occurrence_id=rng.choice(["o1", "o2", "o3", ""]),
                          source=rng.choice(["internal", "host"]), holder="",
                          token_sha256=rng.choice(TOKENS),
                          kind=rng.choice(["recurring", "recurring", "reset", "requested"]),
                          push=rng.random() < 0.3),
        lambda: WakeNow(operator="op", reason="now", occurrence_id=f"op-{rng.randint(1, 3)}",
                        token_sha256=TOKENS[2], push=rng.random() < 0.5),
        lambda: ReportRun(proof, outcome=rng.choice(["ok", "error", "note"]),
                          error_class=rng.choice(["rate_limit", "rate_limit", "auth",
                                                  "unclassified"]),
                          reset_at=now + timedelta(hours=rng.choice([1, 3, 40])),
                          reset_schedule_name="reset-g", note="provider_wait"),
        lambda: TrackJob(proof, job_id=f"j{rng.randint(1, 2)}", kind="ci", ref="r"),
        lambda: UpdateJob(proof, job_id=f"j{rng.randint(1, 2)}", status="completed",
                          conclusion="green"),
        lambda: CheckLiveness(),
        lambda: RequestApproval(proof, "deploy"),
        lambda: ResolveApproval(gate="deploy", decision=rng.choice(["approve", "reject"]),
                                operator="op"),
        lambda: Recover(operator="op", reason="because"),
        lambda: HostContinued(host="claude", trigger="SessionStart", holder="agent-1",
                              token_sha256=rng.choice(TOKENS), session_key="agent:main:k"),
        lambda: Finish("completed", "merged", proof,
                       tuple(Evidence(c, "shown") for c in CRITERIA)),
        lambda: Stop(operator="op", reason="enough"),
    ]
    weights = [8, 2, 4, 3, 2, 3, 2, 4, 1, 4, 1, 1, 3, 1, 1, 1, 1, 1, 0.2]
    return rng.choices(choices, weights)[0]()


def _field(part: Any, name: str) -> Any:
    """A part's field, whether the part is a dict (before) or a value (after)."""
    return part[name] if isinstance(part, dict) else getattr(part, name)


def history(seed: int) -> tuple[list[Any], list[GoalState]]:
    """One goal's events (as the store records them) and its state after
    every EVERY-th of them and after the last."""
    rng = random.Random(seed)  # noqa: S311 (a reproducible history, not a secret)
    now = T0
    state = GoalState()
    recorded: list[Any] = []
    states: list[GoalState] = []

    def record(event: Any) -> None:
        nonlocal state
        state = evolve(state, event)
        recorded.append(event)
        if len(recorded) % EVERY == 0:
            states.append(state)

    for event in decide(state, RunGoal(_start(rng), "agent-1", TOKENS[0]), now):
        record(event)
    for _ in range(rng.randint(5, 40)):
        step = rng.choice([0, 5, 120, 630, 700, 3600, 3600, 4 * 3600, 30 * 3600])
        if rng.random() < 0.04:
            step = -rng.choice([600, 7200])  # the host's clock stepped back
        now += timedelta(seconds=step)
        try:
            made = decide(state, _command(rng, state, now), now)
        except DomainError:
            continue
        for event in made:
            record(event)
    return recorded, [*states, state]


def stored(events: list[Any]) -> list[list[Any]]:
    return [[event.kind, encode(event.payload), iso(event.at)] for event in events]


def capture() -> list[dict[str, Any]]:
    rows = []
    for seed in SEEDS:
        events, states = history(seed)
        rows.append({"seed": seed, "events": stored(events),
                     "states": [json.dumps(state.to_stored()) for state in states]})
    return rows


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps(capture(), indent=0, ensure_ascii=False) + "\n")

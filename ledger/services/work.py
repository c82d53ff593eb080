"""An agent's fenced work on its goal: checkpoint, release the lease (maybe
asking for a wake), finish, ask for an approval, give up the workspace.

Each takes plain values — the caller, the fields, the API's base URL where
the answer tells a host what to call — and answers a typed value with its
guidance (the one-off wake a host must create) built here.
"""

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ledger.domain import (
    Artifact,
    Finish,
    GoalState,
    LeaseProof,
    RecordCheckpoint,
    ReleaseLease,
    ReleaseWorkspace,
)
from ledger.domain.commands import Evidence, WakeRequest
from ledger.domain.finishing import completion_state
from ledger.domain.runs import RequestApproval
from ledger.domain.watchdogs import HOST
from ledger.services.bodies import GoalAnswer, goal_body
from ledger.services.caller import Caller, run

# The API's base URL, or how to get it: only a host goal's requested wake
# needs it, and working it out from a request costs more than the rest of
# the answer (the request's host checked against ALLOWED_HOSTS).
ApiUrl = str | Callable[[], str]


def requested_wake(state: GoalState, api_url: ApiUrl) -> dict[str, Any] | None:
    """The pending one-off wake; a host goal's host must create it itself."""
    wake = state.requested_wake
    if wake is None:
        return None
    shown = wake.stored()
    answer = {k: shown[k] for k in ("due_at", "reason") if k in shown}
    if state.setting("scheduler") == HOST:
        answer["host_one_off"] = {
            "occurrence": "once", "run_at": shown["due_at"],
            "destination": {"method": "POST",
                            "url": f"{api_url() if callable(api_url) else api_url}"
                                   f"/goals/{state.goal_id}/claim",
                            "body": {"occurrence_id": "<the host run's id>",
                                     "reason": shown.get("reason", "")}}}
    return answer


@dataclass(frozen=True)
class Released:
    status: str
    requested_wake: dict[str, Any] | None

    def as_dict(self) -> dict[str, Any]:
        return {"released": True, "status": self.status, "requested_wake": self.requested_wake}


def release(caller: Caller, goal_id: str | uuid.UUID, proof: LeaseProof | None,
            wake: WakeRequest | None, *, api_url: ApiUrl) -> Released:
    state = run(caller, goal_id, ReleaseLease(proof, wake)).state
    return Released(state.status, requested_wake(state, api_url))


@dataclass(frozen=True)
class Checkpointed:
    checkpoint: dict[str, Any]
    version: int
    lease_released: bool
    requested_wake: dict[str, Any] | None

    def as_dict(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint, "version": self.version,
                "lease_released": self.lease_released, "requested_wake": self.requested_wake}


def checkpoint(caller: Caller, goal_id: str | uuid.UUID, proof: LeaseProof | None, *,
               current_step: str, progress_pct: int, completed: tuple[str, ...],
               next_actions: tuple[str, ...], artifacts: tuple[Artifact, ...],
               errors: tuple[str, ...], note: str, release_lease: bool,
               wake: WakeRequest | None, api_url: ApiUrl) -> Checkpointed:
    command = RecordCheckpoint(current_step=current_step, progress_pct=progress_pct,
                               completed=completed, next_actions=next_actions,
                               artifacts=artifacts, errors=errors, note=note,
                               release_lease=release_lease, proof=proof, wake=wake)
    state = run(caller, goal_id, command).state
    return Checkpointed(state.checkpoint_contract(), state.version, release_lease,
                        requested_wake(state, api_url))


@dataclass(frozen=True)
class Finished:
    state: GoalState

    def as_dict(self) -> dict[str, Any]:
        return {"completion_state": completion_state(self.state), "goal": goal_body(self.state)}


def finish(caller: Caller, goal_id: str | uuid.UUID, proof: LeaseProof | None, *,
           status: str, summary: str, evidence: tuple[Evidence, ...]) -> Finished:
    return Finished(run(caller, goal_id, Finish(status, summary, proof, evidence)).state)


def request_approval(caller: Caller, goal_id: str | uuid.UUID, proof: LeaseProof | None, *,
                     gate: str, summary: str) -> GoalAnswer:
    return GoalAnswer(run(caller, goal_id, RequestApproval(proof, gate, summary)).state)


@dataclass(frozen=True)
class WorkspaceReleased:
    workspace: str
    workspace_bound: bool

    def as_dict(self) -> dict[str, Any]:
        return {"workspace": self.workspace, "workspace_bound": self.workspace_bound}


def release_workspace(caller: Caller, goal_id: str | uuid.UUID, proof: LeaseProof | None, *,
                      by_operator: bool, reason: str) -> WorkspaceReleased:
    command = ReleaseWorkspace(proof=proof, by_operator=by_operator, reason=reason)
    state = run(caller, goal_id, command).state
    return WorkspaceReleased(state.workspace, state.workspace_bound)

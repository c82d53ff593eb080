"""Blocking jobs (a CI run, a deploy) a goal waits on: tracked by its agent,
ended by its agent or by whoever holds the job's notify token."""

import uuid
from dataclasses import dataclass
from typing import Any

from ledger.domain import DomainError, LeaseProof
from ledger.domain.jobs import NotifyJob, TrackJob, UpdateJob
from ledger.eventstore import store
from ledger.services import ids
from ledger.services.bodies import job_body
from ledger.services.caller import Caller, run
from ledger.services.tokens import digest, goal_of, issued_for, notify_token


@dataclass(frozen=True)
class Tracked:
    goal_id: str
    job: dict[str, Any]
    notify_token: str = ""  # shown once, when the job is new

    def as_dict(self) -> dict[str, Any]:
        answer: dict[str, Any] = {"job": job_body(self.job), "goal_id": self.goal_id}
        if self.notify_token:
            answer["notify_token"] = self.notify_token
        return answer


def track(caller: Caller, goal_id: str | uuid.UUID, proof: LeaseProof | None, *, kind: str,
          ref: str, link: str, notify: bool) -> Tracked:
    """Track one exact run of a job; the same (kind, ref) again is the same job."""
    goal_id = store.canonical_id(goal_id)
    job_id = ids.new_id()
    token = notify_token(goal_id, job_id) if notify else ""
    command = TrackJob(proof, job_id, kind, ref, digest(token) if token else "", link)
    state = run(caller, goal_id, command).state
    job = next(j for j in reversed(state.jobs) if j["kind"] == kind and j["ref"] == ref)
    return Tracked(state.goal_id, job, token if job["job_id"] == job_id else "")


class NotMyJob(DomainError):
    """One answer for every token that is not this job's, whether the goal it
    names exists or not (a different answer would tell a caller which goal
    ids exist). The API counts it as a bad token."""

    code = "not_found"

    def __init__(self) -> None:
        super().__init__("no such job for this notify token", code="not_found", field="job_id")


def update(caller: Caller, goal_id: str | uuid.UUID, proof: LeaseProof | None, job_id: str, *,
           status: str, conclusion: str) -> dict[str, Any]:
    """The holder records a job's status; the answer is the job as shown."""
    state = run(caller, goal_id, UpdateJob(proof, job_id, status, conclusion)).state
    return {"job": job_body(next(j for j in state.jobs if j["job_id"] == job_id))}


def notify(token: str, job_id: str, *, status: str, conclusion: str,
           link: str) -> dict[str, Any]:
    """A job's end reported with its notify token; the answer names its goal."""
    goal_id = goal_of(token)
    if goal_id is None or not issued_for(token, job_id):
        raise NotMyJob
    command = NotifyJob(job_id, digest(token), status, conclusion, link)
    try:
        state = run(Caller(f"job:{job_id}"[:200]), goal_id, command).state
    except DomainError as error:
        if error.code == "not_found":
            raise NotMyJob from None
        raise
    job = next(j for j in state.jobs if j["job_id"] == job_id)
    return {"job": job_body(job), "goal_id": state.goal_id}

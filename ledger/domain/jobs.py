"""Blocking jobs: a CI run or a deploy a goal waits for. A running one keeps
a goal from finishing (verified completion); the last one to end wakes a waiting goal.
The kinds ``job.tracked`` and ``job.updated`` (and how they fold) are here."""

import hmac
from dataclasses import dataclass
from datetime import datetime

from ledger.domain import progress, validation
from ledger.domain.codec import Payload, event_kind, optional
from ledger.domain.commands import LeaseProof
from ledger.domain.errors import DomainError, InvalidCommand
from ledger.domain.events import Changes, Event, Style, iso
from ledger.domain.leases import fence
from ledger.domain.requested import one_off_wake
from ledger.domain.state import BLOCKED, GoalState
from ledger.domain.text import clean, known

JOB_STATUSES = ("running", "succeeded", "failed", "cancelled")


@dataclass(frozen=True, slots=True)
class TrackJob:
    proof: LeaseProof | None
    job_id: str
    kind: str
    ref: str
    notify_sha256: str = ""  # the digest of the job's own notify token, if it has one
    link: str = ""  # where a human sees the job (its CI run's page)


@dataclass(frozen=True, slots=True)
class UpdateJob:
    proof: LeaseProof | None
    job_id: str
    status: str
    conclusion: str = ""


@dataclass(frozen=True, slots=True)
class NotifyJob:
    """A job's terminal status reported by its own notify token (a CI system,
    a watcher process): no lease, scoped to that one job."""

    job_id: str
    token_sha256: str
    status: str
    conclusion: str = ""
    link: str = ""


def track_job(state: GoalState, cmd: TrackJob, now: datetime) -> list[Event]:
    fence(state, cmd.proof)
    kind = validation.text(cmd.kind, "kind", limit=64, required=True)
    ref = validation.text(cmd.ref, "ref", limit=500, required=True)
    for job in state.jobs:
        if job["kind"] == kind and job["ref"] == ref and job["status"] == "running":
            return []  # the same exact run is tracked once
    if len(state.jobs) >= 100:
        raise InvalidCommand("a goal tracks at most 100 blocking jobs", field="ref")
    job_id = validation.text(cmd.job_id, "job_id", limit=64, required=True)
    return [Event(JobTracked(
        job_id=job_id, kind=kind, ref=ref,
        notify_sha256=validation.sha256(cmd.notify_sha256, "notify")
        if cmd.notify_sha256 else None,
        link=validation.text(cmd.link, "link", limit=500) if cmd.link else None), now)]


def update_job(state: GoalState, cmd: UpdateJob, now: datetime) -> list[Event]:
    fence(state, cmd.proof)
    job = next((j for j in state.jobs if j["job_id"] == cmd.job_id), None)
    if job is None:
        raise DomainError(f"no job {cmd.job_id} on this goal", code="not_found", field="job_id")
    if cmd.status not in JOB_STATUSES:
        raise InvalidCommand(f"status must be one of {', '.join(JOB_STATUSES)}",
                             field="status")
    if job["status"] != "running":
        if job["status"] == cmd.status:
            return []
        raise DomainError(f"job {cmd.job_id} already ended as {job['status']}",
                          code="job_terminal", field="status")
    if cmd.status == "running":
        return []
    return [Event(JobUpdated(job_id=cmd.job_id, status=cmd.status,
                             conclusion=validation.text(cmd.conclusion, "conclusion",
                                                        limit=validation.MAX_NOTE)), now)]


def notify_job(state: GoalState, cmd: NotifyJob, now: datetime) -> list[Event]:
    job = next((j for j in state.jobs if j["job_id"] == cmd.job_id), None)
    # The same answer for an unknown job and a wrong token: a token tells
    # nothing about other jobs.
    if job is None or not job.get("notify_sha256") or not hmac.compare_digest(
            job["notify_sha256"], str(cmd.token_sha256)):
        raise DomainError("no such job for this notify token", code="not_found",
                          field="job_id")
    if cmd.status not in JOB_STATUSES or cmd.status == "running":
        raise InvalidCommand("status must be succeeded, failed or cancelled", field="status")
    if job["status"] != "running":
        if job["status"] == cmd.status:
            return []  # idempotent: reported already
        raise DomainError(f"job {cmd.job_id} already ended as {job['status']}",
                          code="job_terminal", field="status")
    events = [Event(JobUpdated(
        job_id=cmd.job_id, status=cmd.status,
        conclusion=validation.text(cmd.conclusion, "conclusion", limit=validation.MAX_NOTE),
        reported_by="notify_token",
        link=validation.text(cmd.link, "link", limit=500) if cmd.link else None), now)]
    if (state.terminal or state.status == BLOCKED or state.lease is not None
            or state.finish_requested):
        return events  # a worker holds it (it learns itself), or it needs a human
    if any(j["status"] == "running" for j in state.jobs if j["job_id"] != cmd.job_id):
        return events  # still waiting on another job
    # The last running job of a waiting goal ended: wake it at once.
    return events + one_off_wake(state, now, "dependency_ready", now)


# ---------------------------------------------------------------- the job kinds


@event_kind("job.tracked")
@dataclass(frozen=True, slots=True, kw_only=True)
class JobTracked(Payload):
    STYLE = Style("job")

    job_id: str
    kind: str
    ref: str
    notify_sha256: str | None = optional()
    link: str | None = optional()

    def fold(self, state: GoalState, at: datetime) -> Changes:
        job = {"job_id": self.job_id, "kind": self.kind, "ref": self.ref,
               "status": "running", "conclusion": "", "tracked_at": iso(at),
               "updated_at": iso(at)}
        if self.notify_sha256 is not None:
            job["notify_sha256"] = self.notify_sha256
        if self.link is not None:
            job["link"] = self.link
        return {"jobs": [*state.jobs, job]}

    def line(self) -> str:
        return (f"{clean(known(self.kind))} {clean(known(self.ref), 60)} "
                f"(job {clean(known(self.job_id))})")


@event_kind("job.updated")
@dataclass(frozen=True, slots=True, kw_only=True)
class JobUpdated(Payload):
    STYLE = Style("job")

    job_id: str
    status: str
    conclusion: str
    reported_by: str | None = optional()  # notify_token: the job's own token said it
    link: str | None = optional()

    def fold(self, state: GoalState, at: datetime) -> Changes:
        extra = {k: v for k, v in (("link", self.link), ("reported_by", self.reported_by))
                 if v is not None}
        # Waiting on a job is not a lack of progress (its own deadline covers
        # it), but a job's end is not progress either: the clock starts again
        # at the end of the first job wait since the last progress only
        # (ledger.domain.progress.job_ended).
        return {"jobs": [{**job, "status": self.status, "conclusion": self.conclusion,
                          "updated_at": iso(at), **extra} if job["job_id"] == self.job_id else job
                         for job in state.jobs],
                **progress.job_ended(state, at)}

    def line(self) -> str:
        return (f"job {clean(known(self.job_id))} {known(self.status)}"
                + (" (reported by its notify token)" if self.reported_by == "notify_token" else "")
                + (f": {clean(known(self.conclusion), 80)}" if self.conclusion else ""))

"""Watchdogs, wake claims and blocking jobs (rules 7, 9, 10; DESIGN section 6).

One watchdog per goal (a recurring wake), owned by the server (``internal``,
a django-q2 schedule) or by the agent's host (``host``, confirmed by
receipts). A wake is claimed in one transaction and answers exactly one
outcome. Blocking jobs keep a waiting holder from being taken over and keep a
goal from finishing.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from math import ceil
from typing import Any

from ledger.domain import validation as v
from ledger.domain.commands import LeaseProof
from ledger.domain.errors import DomainError, InvalidCommand
from ledger.domain.events import (
    CONTINUATION_CHARGED,
    CONTINUATION_DISPATCHED,
    GOAL_BLOCKED,
    GOAL_COMPLETED,
    GOAL_FAILED,
    GOAL_FINISH_REQUESTED,
    JOB_TRACKED,
    JOB_UPDATED,
    LEASE_EXPIRED,
    RECEIPT_RECORDED,
    WAKE_CANCEL_REQUESTED,
    WAKE_CLAIMED,
    WAKE_SCHEDULED,
    Event,
    iso,
)
from ledger.domain.leases import acquire_events, fence, lease_refusal, lease_stale_at
from ledger.domain.policy import timezone
from ledger.domain.state import BLOCKED, PAUSED, GoalState

INTERNAL, HOST = "internal", "host"
RECEIPT_STATUSES = ("created", "create_failed", "create_uncertain", "cancelled", "disabled",
                    "user_attested_deleted")
RUNS_ON = ("cloud", "local", "unverified")
WAKE_REASONS = ("timeout_recovery", "rate_limit_reset", "dependency_ready", "scheduled_progress")
JOB_STATUSES = ("running", "succeeded", "failed", "cancelled")
CLAIM_MEMORY = 64  # occurrence ids remembered for already_claimed

# Watchdog statuses after which something may still exist on a scheduler and
# must be cancelled (with a receipt) before a goal may complete.
LIVE = frozenset({"requested", "live", "uncertain", "disabled", "cancel_requested"})
DEGRADED = frozenset({"create_failed", "uncertain", "disabled", "failed"})


# ---------------------------------------------------------------- commands


@dataclass(frozen=True, slots=True)
class PrepareWatchdog:
    proof: LeaseProof | None
    interval_seconds: int  # cadence_minutes x the server's minute, frozen into the event
    tzid: str = "UTC"
    schedule_name: str = ""  # internal: the django-q2 schedule's name


@dataclass(frozen=True, slots=True)
class CancelWatchdog:
    proof: LeaseProof | None


@dataclass(frozen=True, slots=True)
class RecordReceipt:
    """What the agent's host did with the watchdog (host backend only)."""

    proof: LeaseProof | None
    status: str
    host_ref_sha256: str = ""
    due_at: str = ""
    runs_on: str = "unverified"
    verified: bool = False  # the host proved where the task runs
    attested_by: str = ""
    note: str = ""


@dataclass(frozen=True, slots=True)
class ClaimWake:
    occurrence_id: str
    source: str  # internal (django-q2 fired) | host (the agent's host fired)
    holder: str
    token_sha256: str
    reason: str = ""  # host may say why; otherwise derived


@dataclass(frozen=True, slots=True)
class RecordDispatch:
    """What a dispatcher did with a granted internal wake."""

    occurrence_id: str
    dispatcher: str
    ok: bool
    detail: str = ""  # a sanitized outcome: HTTP status, exit of the spawn, error class


@dataclass(frozen=True, slots=True)
class ExpireLease:
    """The lease sweeper: record lease.expired for a lapsed lease."""


@dataclass(frozen=True, slots=True)
class TrackJob:
    proof: LeaseProof | None
    job_id: str
    kind: str
    ref: str


@dataclass(frozen=True, slots=True)
class UpdateJob:
    proof: LeaseProof | None
    job_id: str
    status: str
    conclusion: str = ""


# ---------------------------------------------------------------- helpers


def watchdog_live(state: GoalState) -> bool:
    return state.watchdog.get("status") in LIVE


def watchdog_health(state: GoalState) -> str:
    status = state.watchdog.get("status", "")
    if not status:
        return "none"
    return "degraded" if status in DEGRADED else "ok"


def _due(moment: datetime, seconds: int) -> str:
    return iso(moment + timedelta(seconds=seconds))


# ---------------------------------------------------------------- watchdog


def prepare(state: GoalState, cmd: PrepareWatchdog, now: datetime) -> list[Event]:
    fence(state, cmd.proof)
    backend = state.policy.get("scheduler", INTERNAL)
    seconds = cmd.interval_seconds
    if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 1:
        raise InvalidCommand("interval_seconds must be a positive whole number")
    tzid = timezone(cmd.tzid or "UTC", "tzid")
    status = state.watchdog.get("status", "")
    retry = False
    if status in ("requested", "live", "uncertain", "disabled", "cancel_requested", "failed"):
        # Rule 9: never a second watchdog, never retimed. An uncertain create
        # is reconciled by a receipt, never followed by a blind second create.
        return []
    if status == "create_failed":
        if not state.watchdog.get("retry_allowed"):
            return []
        retry = True  # a definitive failure allows exactly one retry of the same create
    data = {
        "backend": backend,
        "interval_seconds": seconds,
        "tzid": tzid,
        "first_due_at": _due(now, seconds),
        "attempt": 2 if retry else 1,
    }
    if backend == INTERNAL:
        name = v.text(cmd.schedule_name, "schedule_name", limit=200, required=True)
        data["schedule_name"] = name
        return [Event(WAKE_SCHEDULED, data, now),
                Event(RECEIPT_RECORDED, {"backend": INTERNAL, "status": "created",
                                         "schedule_name": name,
                                         "due_at": data["first_due_at"]}, now)]
    return [Event(WAKE_SCHEDULED, data, now)]


def cancel(state: GoalState, cmd: CancelWatchdog, now: datetime) -> list[Event]:
    fence(state, cmd.proof)
    return _cancel_events(state, now, why="cancelled by the agent")


def _cancel_events(state: GoalState, now: datetime, *, why: str) -> list[Event]:
    status = state.watchdog.get("status", "")
    if status not in LIVE:
        return []
    if state.watchdog["backend"] == INTERNAL:
        # The server cancels its own schedule in the same transaction.
        return [Event(RECEIPT_RECORDED, {"backend": INTERNAL, "status": "cancelled",
                                         "schedule_name": state.watchdog["schedule_name"],
                                         "note": why}, now)]
    if status == "cancel_requested":
        return []
    return [Event(WAKE_CANCEL_REQUESTED, {"backend": HOST, "note": why}, now)]


def receipt(state: GoalState, cmd: RecordReceipt, now: datetime) -> list[Event]:
    # On a terminal goal the lease is gone; the cancellation receipt of its
    # leftover host watchdog is still welcome (and needed).
    if not state.terminal:
        fence(state, cmd.proof)
    if state.watchdog.get("backend") != HOST:
        raise DomainError("only a host watchdog takes receipts; internal watchdogs record "
                          "their own", code="validation_error", field="status")
    if cmd.status not in RECEIPT_STATUSES:
        raise InvalidCommand(f"status must be one of {', '.join(RECEIPT_STATUSES)}",
                             field="status")
    if state.terminal and cmd.status not in ("cancelled", "user_attested_deleted", "disabled"):
        raise DomainError(f"the goal is {state.status}; only a cancellation receipt is taken",
                          code="goal_terminal")
    data: dict[str, Any] = {"backend": HOST, "status": cmd.status,
                            "note": v.text(cmd.note, "note", limit=v.MAX_NOTE)}
    if cmd.status == "created":
        data["host_ref_sha256"] = v.sha256(cmd.host_ref_sha256, "host_ref")
        data["due_at"] = _iso_field(cmd.due_at, "due_at")
        if cmd.runs_on not in RUNS_ON:
            raise InvalidCommand(f"runs_on must be one of {', '.join(RUNS_ON)}",
                                 field="runs_on")
        if cmd.runs_on == "cloud" and not cmd.verified:
            raise InvalidCommand("runs_on may be cloud only when the host proved it "
                                 "(verified: true)", field="runs_on")
        data["runs_on"] = cmd.runs_on
    if cmd.status == "user_attested_deleted":
        data["attested_by"] = v.text(cmd.attested_by, "attested_by", limit=v.MAX_KEY,
                                     required=True)
    if cmd.status == "create_failed":
        data["retry_allowed"] = state.watchdog.get("attempt", 1) == 1
    events = [Event(RECEIPT_RECORDED, data, now)]
    if cmd.status in ("cancelled", "user_attested_deleted") and state.finish_requested \
            and not state.terminal:
        # Rule 10: the cancellation receipt was what the finish waited for.
        events += _complete(state, state.finish_requested, now)
    return events


def _iso_field(value: str, field: str) -> str:
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise InvalidCommand(f"{field} must be an ISO 8601 date-time", field=field) from None
    if moment.tzinfo is None:
        raise InvalidCommand(f"{field} must carry a time zone offset", field=field)
    return iso(moment)


# ---------------------------------------------------------------- finishing (rule 10)


def finish_events(state: GoalState, status: str, summary: str, generation: int,
                  now: datetime) -> list[Event]:
    """The events of a finish, once the decider has fenced and validated it."""
    running = state.running_jobs()
    if running:
        raise DomainError(
            f"{len(running)} blocking job(s) still running (first: {running[0]['kind']} "
            f"{running[0]['ref']}); record their status first", code="jobs_running")
    request = {"status": status, "summary": summary, "generation": generation}
    backend = state.watchdog.get("backend")
    if watchdog_live(state) and backend == HOST:
        events = [] if state.finish_requested else [
            Event(GOAL_FINISH_REQUESTED, request, now)]
        return events + _cancel_events(state, now, why="the goal is finishing")
    events = _cancel_events(state, now, why="the goal finished")  # internal: cancelled now
    return events + _complete(state, request, now)


def _complete(state: GoalState, request: dict[str, Any], now: datetime) -> list[Event]:
    data = {"summary": request["summary"], "generation": request["generation"]}
    if request["status"] == "completed":
        return [Event(GOAL_COMPLETED, data, now)]
    if request["status"] == "failed":
        return [Event(GOAL_FAILED, {**data, "reason": ""}, now)]
    return [Event(GOAL_BLOCKED, {**data, "reason": "AGENT_BLOCKED"}, now)]


def completion_state(state: GoalState) -> str:
    if state.finish_requested and not state.terminal:
        return "pending_native_cleanup"
    return {"done": "completed", "failed": "failed", "blocked": "blocked"}.get(
        state.status, state.status)


# ---------------------------------------------------------------- claims (section 6)


def claim_outcome(state: GoalState, cmd: ClaimWake, now: datetime) -> dict[str, Any]:
    """Which of the outcomes a claim gets, and why. Pure; ``claim`` turns it
    into events and the shell reports it."""
    if cmd.occurrence_id in state.claimed:
        return {"outcome": "already_claimed", "notes": "this occurrence was handled already"}
    live = watchdog_live(state)
    # A goal that finished (or waits only for its watchdog's cleanup) or that
    # needs a human is never resumed by a wake.
    if state.terminal or state.status == BLOCKED or state.finish_requested:
        what = (state.status if state.terminal else f"blocked ({state.reason})"
                if state.status == BLOCKED else "finished, pending native cleanup")
        if live:
            return {"outcome": "terminal_cleanup_required",
                    "notes": f"the goal is {what}; cancel its watchdog, resume nothing"}
        return {"outcome": "terminal_noop", "notes": f"the goal is {what}"}
    if (cmd.source == HOST and state.watchdog.get("backend") == HOST
            and state.watchdog.get("status") in ("requested", "uncertain")):
        return {"outcome": "receipt_required",
                "notes": "the host watchdog's creation is not confirmed; record a receipt "
                         "(created, create_failed or user_attested_deleted) first"}
    if state.status == PAUSED and state.paused_until:
        until = datetime.fromisoformat(state.paused_until)
        if now < until:
            return {"outcome": "not_due", "notes": f"paused until {state.paused_until}",
                    "retry_after_seconds": ceil((until - now).total_seconds())}
    next_due = state.watchdog.get("next_due_at")
    interval = state.watchdog.get("interval_seconds", 0)
    pause_over = state.status == PAUSED and bool(state.paused_until)
    if next_due and not pause_over:  # the one-off wake at a reset is due whenever it fires
        # Early by more than half an interval (at most a minute): not this one.
        tolerance = timedelta(seconds=min(60, interval / 2))
        due = datetime.fromisoformat(next_due)
        if now < due - tolerance:
            return {"outcome": "not_due", "notes": f"the next wake is due at {next_due}",
                    "retry_after_seconds": ceil((due - now).total_seconds())}
    stale_at = lease_stale_at(state)
    if (stale_at is not None and now >= stale_at and state.lease.get("via") == "wake"
            and not state.lease.get("active") and not state.running_jobs()):
        # Rule 6: a dispatched continuation went silent; it may have done
        # something. Never replay it.
        return {"outcome": "terminal_cleanup_required", "block": "INTERRUPTED_UNKNOWN",
                "notes": "the last continuation's lease expired without a heartbeat, "
                         "checkpoint or outcome: INTERRUPTED_UNKNOWN"}
    refusal = lease_refusal(state, now)
    if refusal is not None:
        return {"outcome": "worker_busy_noop", "notes": refusal["why"],
                "retry_after_seconds": refusal["retry_after_seconds"]}
    if state.retry_count + 1 > state.policy.get("max_wake_retries", 5):
        return {"outcome": "terminal_cleanup_required", "block": "WAKE_RETRIES_EXHAUSTED",
                "notes": f"{state.retry_count} consecutive wakes without a new checkpoint: "
                         "WAKE_RETRIES_EXHAUSTED"}
    budget = state.policy.get("max_continuations", 3)
    if state.continuations_used >= budget:
        return {"outcome": "terminal_cleanup_required", "block": "CONTINUATION_STOPPED",
                "notes": f"the continuation budget is spent ({budget} of {budget}): "
                         "CONTINUATION_STOPPED"}
    return {"outcome": "recurring_acquired", "notes": "resume from the latest checkpoint"}


def _reason(state: GoalState, cmd: ClaimWake) -> str:
    if cmd.reason:
        if cmd.reason not in WAKE_REASONS:
            raise InvalidCommand(f"reason must be one of {', '.join(WAKE_REASONS)}",
                                 field="reason")
        return cmd.reason
    if state.lease or state.lease_end == "expired":
        return "timeout_recovery"
    if state.paused_until:
        return "rate_limit_reset"
    since = state.last_wake.get("at", "")
    if any(job["status"] != "running" and job["updated_at"] > since for job in state.jobs):
        return "dependency_ready"
    return "scheduled_progress"


def claim(state: GoalState, cmd: ClaimWake, now: datetime) -> list[Event]:
    if cmd.source not in (INTERNAL, HOST):
        raise InvalidCommand("source must be internal or host", field="source")
    occurrence = v.text(cmd.occurrence_id, "occurrence_id", limit=300, required=True)
    answer = claim_outcome(state, cmd, now)
    outcome = answer["outcome"]
    if outcome in ("already_claimed", "receipt_required"):
        return []  # nothing changes, not even the record of a claim
    reason = _reason(state, cmd)
    interval = state.watchdog.get("interval_seconds", 0)
    data: dict[str, Any] = {
        "occurrence_id": occurrence,
        "source": cmd.source,
        "outcome": outcome,
        "reason": reason,
        "notes": answer["notes"],
        "next_due_at": _due(now, interval) if interval and outcome != "not_due" else
        state.watchdog.get("next_due_at", ""),
    }
    if outcome == "recurring_acquired":
        data["retry_count"] = state.retry_count + 1
    if answer.get("retry_after_seconds") is not None:
        data["retry_after_seconds"] = answer["retry_after_seconds"]
    events = [Event(WAKE_CLAIMED, data, now)]
    if outcome == "terminal_cleanup_required":
        if answer.get("block"):
            if state.lease:
                events.append(Event(LEASE_EXPIRED, {"generation": state.lease["generation"],
                                                    "holder": state.lease["holder"],
                                                    "expired_at": state.lease["expires_at"]},
                                    now))
            events.append(Event(GOAL_BLOCKED, {"summary": answer["notes"], "generation": 0,
                                               "reason": answer["block"]}, now))
        events += _cancel_events(state, now, why=answer["notes"])
    if outcome == "recurring_acquired":
        # Rule 5: the continuation is charged in the transaction that grants
        # its lease, before anything is dispatched: a crash after this commit
        # never yields a free retry (rule 6 then stops the silent attempt).
        events.append(Event(CONTINUATION_CHARGED, {
            "attempt": state.continuations_used + 1,
            "max": state.policy.get("max_continuations", 3),
            "occurrence_id": occurrence}, now))
        # An internal wake's continuation works as the goal's own agent.
        events += acquire_events(state, cmd.holder or state.agent, cmd.token_sha256, now,
                                 via="wake")
    return events


def dispatched(state: GoalState, cmd: RecordDispatch, now: datetime) -> list[Event]:
    return [Event(CONTINUATION_DISPATCHED, {
        "occurrence_id": v.text(cmd.occurrence_id, "occurrence_id", limit=300, required=True),
        "dispatcher": v.text(cmd.dispatcher, "dispatcher", limit=64, required=True),
        "ok": bool(cmd.ok),
        "detail": v.text(cmd.detail, "detail", limit=500),
    }, now)]


# ---------------------------------------------------------------- sweeper


def expire(state: GoalState, cmd: ExpireLease, now: datetime) -> list[Event]:
    stale_at = lease_stale_at(state)
    if stale_at is None or now < stale_at or state.running_jobs():
        return []
    events = [Event(LEASE_EXPIRED, {"generation": state.lease["generation"],
                                    "holder": state.lease["holder"],
                                    "expired_at": state.lease["expires_at"]}, now)]
    if state.lease.get("via") == "wake" and not state.lease.get("active"):
        # Rule 6: uncertain attempts are terminal for automation.
        events.append(Event(GOAL_BLOCKED, {
            "summary": "the dispatched continuation's lease expired with no heartbeat, "
                       "checkpoint or outcome", "generation": 0,
            "reason": "INTERRUPTED_UNKNOWN"}, now))
    return events


def cancel_on_stop(state: GoalState, now: datetime) -> list[Event]:
    """A stopped goal keeps no internal schedule; a host one is asked to go."""
    return _cancel_events(state, now, why="stopped by an operator")


# ---------------------------------------------------------------- jobs


def track_job(state: GoalState, cmd: TrackJob, now: datetime) -> list[Event]:
    fence(state, cmd.proof)
    kind = v.text(cmd.kind, "kind", limit=64, required=True)
    ref = v.text(cmd.ref, "ref", limit=500, required=True)
    for job in state.jobs:
        if job["kind"] == kind and job["ref"] == ref and job["status"] == "running":
            return []  # the same exact run is tracked once
    if len(state.jobs) >= 100:
        raise InvalidCommand("a goal tracks at most 100 blocking jobs", field="ref")
    job_id = v.text(cmd.job_id, "job_id", limit=64, required=True)
    return [Event(JOB_TRACKED, {"job_id": job_id, "kind": kind, "ref": ref}, now)]


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
    return [Event(JOB_UPDATED, {"job_id": cmd.job_id, "status": cmd.status,
                                "conclusion": v.text(cmd.conclusion, "conclusion",
                                                     limit=v.MAX_NOTE)}, now)]


# ---------------------------------------------------------------- evolve


def scheduled(state: GoalState, data: dict[str, Any], at: str) -> dict[str, Any]:
    if data.get("kind") == "reset":  # the one-off wake at a rate-limit reset
        return {"reset_wake": {"due_at": data["due_at"],
                               "schedule_name": data["schedule_name"]}}
    watchdog = {
        "backend": data["backend"],
        "interval_seconds": data["interval_seconds"],
        "tzid": data["tzid"],
        "status": "requested",
        "attempt": data["attempt"],
        "first_due_at": data["first_due_at"],
        "next_due_at": data["first_due_at"],
        "retry_allowed": False,
    }
    if "schedule_name" in data:
        watchdog["schedule_name"] = data["schedule_name"]
    return {"watchdog": watchdog}


_RECEIPT_STATUS = {"created": "live", "create_failed": "create_failed",
                   "create_uncertain": "uncertain", "cancelled": "cancelled",
                   "disabled": "disabled", "user_attested_deleted": "cancelled"}


def receipted(state: GoalState, data: dict[str, Any], at: str) -> dict[str, Any]:
    watchdog = {**state.watchdog, "status": _RECEIPT_STATUS[data["status"]],
                "last_receipt": data["status"], "last_receipt_at": at}
    if data["status"] == "created":
        watchdog["next_due_at"] = data["due_at"]
        if "host_ref_sha256" in data:
            watchdog["host_ref_sha256"] = data["host_ref_sha256"]
            watchdog["runs_on"] = data["runs_on"]
    if data["status"] == "create_failed":
        watchdog["retry_allowed"] = data["retry_allowed"]
        if not data["retry_allowed"]:
            watchdog["status"] = "failed"
    return {"watchdog": watchdog}


def cancel_requested(state: GoalState, data: dict[str, Any], at: str) -> dict[str, Any]:
    return {"watchdog": {**state.watchdog, "status": "cancel_requested"}}


def claimed(state: GoalState, data: dict[str, Any], at: str) -> dict[str, Any]:
    changes: dict[str, Any] = {
        "claimed": [*state.claimed, data["occurrence_id"]][-CLAIM_MEMORY:],
        "last_wake": {"occurrence_id": data["occurrence_id"], "outcome": data["outcome"],
                      "reason": data["reason"], "at": at},
    }
    if state.watchdog and data.get("next_due_at"):
        changes["watchdog"] = {**state.watchdog, "next_due_at": data["next_due_at"]}
    if "retry_count" in data:
        changes["retry_count"] = data["retry_count"]
    return changes


def finish_requested(state: GoalState, data: dict[str, Any], at: str) -> dict[str, Any]:
    return {"finish_requested": dict(data), "reason": "PENDING_NATIVE_CLEANUP"}


def job_tracked(state: GoalState, data: dict[str, Any], at: str) -> dict[str, Any]:
    job = {"job_id": data["job_id"], "kind": data["kind"], "ref": data["ref"],
           "status": "running", "conclusion": "", "tracked_at": at, "updated_at": at}
    return {"jobs": [*state.jobs, job]}


def job_updated(state: GoalState, data: dict[str, Any], at: str) -> dict[str, Any]:
    return {"jobs": [{**job, "status": data["status"], "conclusion": data["conclusion"],
                      "updated_at": at} if job["job_id"] == data["job_id"] else job
                     for job in state.jobs]}

"""Watchdogs, wake claims and blocking jobs (rules 7, 9, 10; DESIGN section 6).

One watchdog per goal (a recurring wake), owned by the server (``internal``,
a django-q2 schedule) or by the agent's host (``host``, confirmed by
receipts). A wake is claimed in one transaction and answers exactly one
outcome. Blocking jobs keep a waiting holder from being taken over and keep a
goal from finishing.
"""

import hmac
from dataclasses import dataclass
from datetime import datetime, timedelta
from math import ceil
from typing import Any

from ledger.domain import timing
from ledger.domain import validation as v
from ledger.domain.commands import LeaseProof, WakeRequest
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
    LEASE_RELEASED,
    RECEIPT_RECORDED,
    WAKE_CANCEL_REQUESTED,
    WAKE_CLAIMED,
    WAKE_SCHEDULED,
    Event,
    iso,
)
from ledger.domain.leases import acquire_events, fence, lease_refusal, lease_stale_at
from ledger.domain.policy import timezone
from ledger.domain.state import BLOCKED, PAUSED, WAITING, GoalState

INTERNAL, HOST, OPERATOR = "internal", "host", "operator"
WAKE_KINDS = ("recurring", "reset", "requested", "operator")
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
    interval_seconds: int = 0  # 0: the goal's own (policy.interval_seconds)
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
    occurrence_id: str  # "" from a host: its slot stands for it
    source: str  # internal (django-q2 fired) | host (the agent's host fired) | operator
    holder: str  # the lease holder; for an operator, the operator's name
    token_sha256: str
    reason: str = ""  # host may say why; otherwise derived
    kind: str = "recurring"  # recurring (the watchdog) | reset | requested | operator
    intended_at: str = ""  # internal: the slot django-q2 meant to run (ISO)
    push: bool = False  # internal: a push dispatcher will start the continuation
    # The configured dispatchers that hand over the lease their wake grants:
    # a goal naming one is pushed, decided here on the locked state (no
    # unlocked pre-read of the goal by the shell).
    push_dispatchers: frozenset[str] = frozenset()
    note: str = ""  # an operator's why
    operator: str = ""  # an operator's name (source operator)


@dataclass(frozen=True, slots=True)
class WakeNow:
    """An operator's "wake now" (recorded with who and why)."""

    operator: str
    reason: str
    occurrence_id: str
    token_sha256: str
    push: bool = False
    push_dispatchers: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class RecordDispatch:
    """What a dispatcher did with a granted internal wake."""

    occurrence_id: str
    dispatcher: str
    ok: bool
    detail: str = ""  # a sanitized outcome: HTTP status, exit of the spawn, error class
    # When not ok: True if the continuation may have started anyway (a
    # timeout after the request was sent); False if it certainly did not.
    uncertain: bool = False
    generation: int = 0  # the lease generation the dispatch carried


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
    backend = state.setting("scheduler")
    seconds = cmd.interval_seconds or interval_of(state)
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
        name = v.text(cmd.schedule_name or schedule_name(state.goal_id), "schedule_name",
                      limit=200, required=True)
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
    return v.instant(value, field)  # one rule for every instant an agent sends


# ---------------------------------------------------------------- finishing (rule 10)


def finish_events(state: GoalState, status: str, summary: str, generation: int,
                  now: datetime, *, evidence: list[dict[str, str]] | None = None) -> list[Event]:
    """The events of a finish, once the decider has fenced and validated it."""
    running = state.running_jobs()
    if running:
        raise DomainError(
            f"{len(running)} blocking job(s) still running (first: {running[0]['kind']} "
            f"{running[0]['ref']}); record their status first", code="jobs_running")
    request = {"status": status, "summary": summary, "generation": generation,
               **({"evidence": evidence} if status == "completed" else {})}
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
        # A finish requested before evidence existed has none: read it as [].
        return [Event(GOAL_COMPLETED, {**data, "evidence": list(request.get("evidence", []))},
                      now)]
    if request["status"] == "failed":
        return [Event(GOAL_FAILED, {**data, "reason": ""}, now)]
    return [Event(GOAL_BLOCKED, {**data, "reason": "AGENT_BLOCKED"}, now)]


def completion_state(state: GoalState) -> str:
    if state.finish_requested and not state.terminal:
        return "pending_native_cleanup"
    return {"done": "completed", "failed": "failed", "blocked": "blocked"}.get(
        state.status, state.status)


# ---------------------------------------------------------------- claims (section 6)

# Outcomes that use up their occurrence: a later fire of the same one is
# already_claimed. worker_busy_noop and not_due consume nothing, so the same
# occurrence may be claimed again after retry_after_seconds.
CONSUMING = frozenset({"recurring_acquired", "ready_for_pull", "terminal_cleanup_required"})


def interval_of(state: GoalState) -> int:
    """The watchdog's interval in seconds, frozen into the goal's policy at start."""
    policy = state.policy
    return policy.get("interval_seconds") or state.setting("cadence_minutes") * 60


# The django-q2 schedule rows of a goal's wakes, named after it: one of each.
def schedule_name(goal_id: str) -> str:
    return f"wakeledger-watchdog-{goal_id}"


def reset_schedule_name(goal_id: str) -> str:
    return f"wakeledger-reset-{goal_id}"


def requested_schedule_name(goal_id: str) -> str:
    return f"wakeledger-wake-{goal_id}"


def recovery(state: GoalState) -> bool:
    """Rule 5: would resuming now be a recovery continuation (charged)? Yes
    when the goal's last attempt did not end cleanly: its lease is still there
    (it went stale) or expired, or a rate limit paused it."""
    return bool(state.lease) or state.lease_end == "expired" or bool(state.paused_until)


def interrupted(state: GoalState, now: datetime) -> bool:
    """Rule 6, decided here for every path (claim, sweeper): a continuation
    that was handed over (dispatched, or its lease taken by a claimant or a
    pull) went silent past its lease and stale grace, with no heartbeat,
    checkpoint or outcome. A blocking job it tracked is no sign of life: a
    holder that waits on one heartbeats (DESIGN section 6)."""
    stale_at = lease_stale_at(state)
    return (stale_at is not None and now >= stale_at
            and state.lease.get("via") in ("wake", "pull")
            and not state.lease.get("active"))


def interrupted_events(state: GoalState, now: datetime) -> list[Event]:
    why = ("the last continuation's lease expired without a heartbeat, checkpoint or "
           "outcome: INTERRUPTED_UNKNOWN")
    return [lease_expired_event(state, now),
            Event(GOAL_BLOCKED, {"summary": why, "generation": 0,
                                 "reason": "INTERRUPTED_UNKNOWN"}, now)]


def lease_expired_event(state: GoalState, now: datetime) -> Event:
    return Event(LEASE_EXPIRED, {"generation": state.lease["generation"],
                                 "holder": state.lease["holder"],
                                 "expired_at": state.lease["expires_at"]}, now)


def _slot(state: GoalState, cmd: ClaimWake, now: datetime) -> datetime | None:
    """The recurring slot a fire belongs to (None for one-off wakes)."""
    if cmd.kind != "recurring" or not state.watchdog:
        return None
    return timing.slot_of(state.watchdog, _intended(cmd, now))


def _intended(cmd: ClaimWake, now: datetime) -> datetime:
    """When the fire was meant to happen: django-q2's intended run time, or now."""
    try:
        fired = datetime.fromisoformat(cmd.intended_at) if cmd.intended_at else now
    except ValueError:
        return now  # not a time: the occurrence id still names the fire
    return fired if fired.tzinfo is not None else now


def occurrence_of(state: GoalState, cmd: ClaimWake, now: datetime) -> str:
    """A claim's identity. A host fire without an id of its own is its slot."""
    if cmd.occurrence_id:
        return v.text(cmd.occurrence_id, "occurrence_id", limit=300, required=True)
    slot = _slot(state, cmd, now)
    if slot is None:
        raise InvalidCommand("occurrence_id is required when the goal has no watchdog",
                             field="occurrence_id")
    return f"{cmd.source}:slot:{iso(slot)}"


def claim_outcome(state: GoalState, cmd: ClaimWake, now: datetime) -> dict[str, Any]:
    """Which of the outcomes a claim gets, and why. Pure; ``claim`` turns it
    into events and the shell reports it."""
    if occurrence_of(state, cmd, now) in state.claimed:
        return {"outcome": "already_claimed", "notes": "this occurrence was handled already"}
    live = watchdog_live(state)
    # A goal that finished (or waits only for its watchdog's cleanup) or that
    # needs a human is never resumed by a wake.
    if state.terminal or state.finish_requested:
        what = state.status if state.terminal else "finished, pending native cleanup"
        if live:
            return {"outcome": "terminal_cleanup_required",
                    "notes": f"the goal is {what}; cancel its watchdog, resume nothing"}
        return {"outcome": "terminal_noop", "notes": f"the goal is {what}"}
    if state.status == BLOCKED:
        if live and state.watchdog.get("backend") == INTERNAL:
            # A blocked goal keeps no internal schedule (settle cancels it);
            # one that survived from an older release goes now.
            return {"outcome": "terminal_cleanup_required",
                    "notes": f"the goal is blocked ({state.reason}); cancel its watchdog, "
                             "resume nothing"}
        # Not terminal: an operator may recover it, and its host watchdog is
        # then needed again. Nothing is consumed or cancelled.
        return {"outcome": "terminal_noop",
                "notes": f"the goal is blocked ({state.reason}); resume nothing until an "
                         "operator acts"}
    if (cmd.source == HOST and state.watchdog.get("backend") == HOST
            and state.watchdog.get("status") in ("requested", "uncertain")):
        return {"outcome": "receipt_required",
                "notes": "the host watchdog's creation is not confirmed; record a receipt "
                         "(created, create_failed or user_attested_deleted) first"}
    operator = cmd.source == OPERATOR
    if state.status == PAUSED and state.paused_until and not operator:
        until = datetime.fromisoformat(state.paused_until)
        if now < until:
            return {"outcome": "not_due", "notes": f"paused until {state.paused_until}",
                    "retry_after_seconds": ceil((until - now).total_seconds())}
    slot = _slot(state, cmd, now)
    if slot is not None and not operator:
        early = timing.early_by(state.watchdog, slot, now)
        if early > 0:
            return {"outcome": "not_due", "notes": f"the next wake is due at {iso(slot)}",
                    "retry_after_seconds": ceil((slot - now).total_seconds())}
    if interrupted(state, now):
        return {"outcome": "terminal_cleanup_required", "interrupted": True,
                "notes": "the last continuation's lease expired without a heartbeat, "
                         "checkpoint or outcome: INTERRUPTED_UNKNOWN"}
    # An operator's wake ends a pause early; a live worker still comes first.
    refusal = lease_refusal(state.but(paused_until="") if operator else state, now)
    if refusal is not None:
        return {"outcome": "worker_busy_noop", "notes": refusal["why"],
                "retry_after_seconds": refusal["retry_after_seconds"]}
    if state.retry_count + 1 > state.setting("max_wake_retries") and not operator:
        return {"outcome": "terminal_cleanup_required", "block": "WAKE_RETRIES_EXHAUSTED",
                "notes": f"{state.retry_count} consecutive wakes without a new checkpoint: "
                         "WAKE_RETRIES_EXHAUSTED"}
    charge = recovery(state) and not operator
    budget = state.setting("max_continuations")
    if charge and state.continuations_used >= budget:
        block = "RATE_LIMIT_STOPPED" if state.paused_until else "CONTINUATION_STOPPED"
        return {"outcome": "terminal_cleanup_required", "block": block,
                "notes": f"the continuation budget is spent ({budget} of {budget}): {block}"}
    if cmd.source != HOST and not pushed(state, cmd):
        # Dispatcher "none" is pull: a due wake hands a lease to nobody. The
        # goal is ready; its agent's own claim, run_goal or lease call takes it.
        return {"outcome": "ready_for_pull", "charge": charge,
                "notes": "ready: the goal's agent resumes it by taking its lease"}
    return {"outcome": "recurring_acquired", "charge": charge,
            "notes": "resume from the latest checkpoint"}


def pushed(state: GoalState, cmd: ClaimWake) -> bool:
    """Whether a granted internal or operator wake is pushed to a dispatcher
    that starts the continuation with its lease (else it is pulled)."""
    return cmd.source != HOST and (cmd.push or state.setting("dispatch") in cmd.push_dispatchers)


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
    if cmd.kind == "requested" and state.requested_wake.get("reason"):
        return state.requested_wake["reason"]
    since = state.last_wake.get("at", "")
    if any(job["status"] != "running" and job["updated_at"] > since for job in state.jobs):
        return "dependency_ready"
    return "scheduled_progress"


def claim(state: GoalState, cmd: ClaimWake, now: datetime) -> list[Event]:
    if cmd.source not in (INTERNAL, HOST, OPERATOR):
        raise InvalidCommand("source must be internal, host or operator", field="source")
    if cmd.kind not in WAKE_KINDS:
        raise InvalidCommand(f"kind must be one of {', '.join(WAKE_KINDS)}", field="kind")
    occurrence = occurrence_of(state, cmd, now)
    answer = claim_outcome(state, cmd, now)
    outcome = answer["outcome"]
    if outcome in ("already_claimed", "receipt_required"):
        return []  # nothing changes, not even the record of a claim
    data: dict[str, Any] = {
        "occurrence_id": occurrence,
        "source": cmd.source,
        "kind": cmd.kind,
        "outcome": outcome,
        "reason": _reason(state, cmd),
        "notes": answer["notes"],
    }
    slot = _slot(state, cmd, now)
    if slot is not None:
        data["slot"] = iso(slot)
        # The next slot after the one that fired: claims never move the anchor.
        # A fire so late that later slots passed too (the scheduler was down)
        # stands for them all: the next is the first slot ahead, as django-q2
        # (catch_up off) and a host's scheduler fire it — never a replay of
        # each missed slot, which rule 7 would count as wakes without progress.
        following = slot + timedelta(seconds=state.watchdog["interval_seconds"])
        if following <= now:
            following = timing.slot_after(state.watchdog, now) or following
        current = state.watchdog.get("next_due_at", "")
        if not current or following > datetime.fromisoformat(current):
            data["next_due_at"] = iso(following)
    if cmd.source == OPERATOR:
        data["operator"] = v.text(cmd.operator, "operator", limit=v.MAX_KEY, required=True)
        data["why"] = v.text(cmd.note, "reason", limit=v.MAX_NOTE, required=True)
    if outcome in ("recurring_acquired", "ready_for_pull"):
        # Rule 7: a wake without progress until a checkpoint says otherwise.
        # A ready goal that nobody pulls counts each further due wake too, so
        # it ends visibly blocked instead of waiting forever.
        data["retry_count"] = state.retry_count + 1
    if answer.get("retry_after_seconds") is not None:
        data["retry_after_seconds"] = answer["retry_after_seconds"]
    if outcome == "ready_for_pull":
        data["charge"] = answer["charge"] or bool(state.ready.get("charge"))
    events = [Event(WAKE_CLAIMED, data, now)]
    if outcome == "terminal_cleanup_required":
        if answer.get("interrupted"):
            events += interrupted_events(state, now)
        elif answer.get("block"):
            if state.lease:
                events.append(lease_expired_event(state, now))
            events.append(Event(GOAL_BLOCKED, {"summary": answer["notes"], "generation": 0,
                                               "reason": answer["block"]}, now))
        else:
            events += _cancel_events(state, now, why=answer["notes"])
    if outcome == "recurring_acquired":
        if answer["charge"]:
            # Rule 5: a recovery continuation is charged in the transaction
            # that grants its lease, before anything is dispatched: a crash
            # after this commit never yields a free retry (rule 6 then stops
            # the silent attempt).
            events.append(_charge(state, occurrence, now))
        events += acquire_events(state, cmd.holder or state.agent, cmd.token_sha256, now,
                                 via="wake")
    return events


def _charge(state: GoalState, occurrence: str, now: datetime) -> Event:
    return Event(CONTINUATION_CHARGED, {
        "attempt": state.continuations_used + 1,
        "max": state.setting("max_continuations"),
        "occurrence_id": occurrence}, now)


def pull_events(state: GoalState, holder: str, token_sha256: str, now: datetime) -> list[Event]:
    """The agent's own lease call on a goal with a due wake (ready, or paused
    past its reset before the reset wake fired): it takes the lease, and a
    recovery continuation is charged (rule 5) — once, whichever came first."""
    if state.ready:
        pulled = {"occurrence_id": state.ready["occurrence_id"],
                  "reason": state.ready["reason"]}
        charge = bool(state.ready.get("charge"))
    else:
        pulled = {"occurrence_id": f"pull:reset:{state.paused_until}",
                  "reason": "rate_limit_reset"}
        charge = True
    events = []
    if charge:
        budget = state.setting("max_continuations")
        if state.continuations_used >= budget:
            block = "RATE_LIMIT_STOPPED" if state.paused_until else "CONTINUATION_STOPPED"
            return [Event(GOAL_BLOCKED, {
                "summary": f"the continuation budget is spent ({budget} of {budget}): {block}",
                "generation": 0, "reason": block}, now)]
        events.append(_charge(state, pulled["occurrence_id"], now))
    grant = acquire_events(state, holder, token_sha256, now, via="pull")
    grant[-1] = Event(grant[-1].kind, {**grant[-1].data, "pulled": pulled}, now)
    return events + grant


def due_for_pull(state: GoalState, now: datetime) -> bool:
    """A lease call now resumes a due wake: the goal is ready, or paused past
    its reset with the reset wake not fired yet."""
    if state.ready:
        return True
    return (state.status == PAUSED and bool(state.paused_until)
            and now >= datetime.fromisoformat(state.paused_until))


def dispatched(state: GoalState, cmd: RecordDispatch, now: datetime) -> list[Event]:
    data = {
        "occurrence_id": v.text(cmd.occurrence_id, "occurrence_id", limit=300, required=True),
        "dispatcher": v.text(cmd.dispatcher, "dispatcher", limit=64, required=True),
        "ok": bool(cmd.ok),
        "detail": v.text(cmd.detail, "detail", limit=500),
    }
    if not cmd.ok:
        data["uncertain"] = bool(cmd.uncertain)
    events = [Event(CONTINUATION_DISPATCHED, data, now)]
    if (not cmd.ok and not cmd.uncertain and state.lease
            and state.lease["generation"] == cmd.generation):
        # Rule 6: a dispatch that certainly started nothing is not uncertain.
        # Its lease goes at once and the goal waits for the next wake (the
        # charge is not refunded: the budget bounds attempts, not successes).
        events.append(Event(LEASE_RELEASED, {"generation": cmd.generation,
                                             "why": f"dispatch failed: {data['detail']}"}, now))
    return events


# ---------------------------------------------------------------- keeping goals alive


def operator_wake(state: GoalState, cmd: WakeNow, now: datetime) -> list[Event]:
    """An operator's "wake now": ends a pause early and resumes the goal as a
    wake would (pull or push), recorded with who and why."""
    if state.terminal or state.status == BLOCKED:
        raise DomainError(f"a {state.status} goal cannot be woken; "
                          + ("recover it first" if state.status == BLOCKED else
                             "start a new one"), code="not_wakeable")
    claim_cmd = ClaimWake(cmd.occurrence_id, OPERATOR, "", cmd.token_sha256, kind="operator",
                          push=cmd.push, push_dispatchers=cmd.push_dispatchers,
                          note=cmd.reason, operator=cmd.operator)
    answer = claim_outcome(state, claim_cmd, now)
    if answer["outcome"] == "worker_busy_noop":
        raise DomainError(f"there is nothing to wake: {answer['notes']}", code="not_wakeable",
                          retry_after_seconds=answer.get("retry_after_seconds"))
    return claim(state, claim_cmd, now)


def settle(before: GoalState, after: GoalState, now: datetime) -> list[Event]:
    """What a command's events (``before`` -> ``after``) leave to do so that no
    goal is ever silently stuck (DESIGN section 6, "Liveness"). Decided once, for every command:

    - a goal that becomes blocked keeps no internal schedule firing at it
      (an operator's recover or approval re-arms it);
    - an internal goal that would be stuck (no lease, no pending wake) or that
      is ready gets its watchdog (re)armed: due at once after an operator
      unblocked it, at the next interval otherwise. A ready goal needs it too:
      each further slot nobody pulls counts against rule 7, so it ends visibly
      blocked instead of waiting forever;
    - a host goal an operator unblocked is made ready for its agent to pull,
      since only its host can re-create its schedule.
    """
    if after.terminal or after.finish_requested:
        return []
    if after.status == BLOCKED:
        if after.watchdog.get("backend") == INTERNAL and watchdog_live(after):
            return _cancel_events(after, now, why=f"blocked ({after.reason})")
        return []
    unblocked = before.status == BLOCKED
    stuck = timing.nothing_fires(after)
    if not stuck and not (after.ready and not after.lease):
        return []
    backend = after.setting("scheduler")
    if backend == INTERNAL and after.watchdog.get("status") not in timing.FIRING:
        interval = interval_of(after)
        first = now if unblocked else now + timedelta(seconds=interval)
        return arm_events(after, interval, iso(first), now)
    if backend == HOST and unblocked and stuck:
        return [Event(WAKE_CLAIMED, {
            "occurrence_id": f"operator:unblocked:{after.version}", "source": OPERATOR,
            "kind": "operator", "outcome": "ready_for_pull", "reason": "scheduled_progress",
            "notes": "unblocked by an operator: ready for its agent to pull",
            "charge": False, "retry_count": 0}, now)]
    return []


def arm_events(state: GoalState, interval: int, first_due_at: str, now: datetime) -> list[Event]:
    name = schedule_name(state.goal_id)
    data = {"backend": INTERNAL, "interval_seconds": interval,
            "tzid": state.watchdog.get("tzid") or state.session.get("timezone") or "UTC",
            "first_due_at": first_due_at, "attempt": 1, "schedule_name": name}
    return [Event(WAKE_SCHEDULED, data, now),
            Event(RECEIPT_RECORDED, {"backend": INTERNAL, "status": "created",
                                     "schedule_name": name, "due_at": first_due_at}, now)]


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
    data = {"job_id": job_id, "kind": kind, "ref": ref}
    if cmd.notify_sha256:
        data["notify_sha256"] = v.sha256(cmd.notify_sha256, "notify")
    if cmd.link:
        data["link"] = v.text(cmd.link, "link", limit=500)
    return [Event(JOB_TRACKED, data, now)]


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
    data = {"job_id": cmd.job_id, "status": cmd.status,
            "conclusion": v.text(cmd.conclusion, "conclusion", limit=v.MAX_NOTE),
            "reported_by": "notify_token"}
    if cmd.link:
        data["link"] = v.text(cmd.link, "link", limit=500)
    events = [Event(JOB_UPDATED, data, now)]
    if state.terminal or state.status == BLOCKED or state.lease or state.finish_requested:
        return events  # a worker holds it (it learns itself), or it needs a human
    if any(j["status"] == "running" for j in state.jobs if j["job_id"] != cmd.job_id):
        return events  # still waiting on another job
    # The last running job of a waiting goal ended: wake it at once.
    return events + one_off_wake(state, now, "dependency_ready", now)


def requested_wake_events(state: GoalState, request: WakeRequest, now: datetime) -> list[Event]:
    """The one-off wake an agent asks for as it releases its lease: at least a
    minute away, at most one watchdog interval (rule 9: it never retimes or
    replaces the recurring watchdog; a later request replaces this one)."""
    if request.reason not in WAKE_REASONS:
        raise InvalidCommand(f"wake.reason must be one of {', '.join(WAKE_REASONS)}",
                             field="wake.reason")
    if (request.in_seconds is None) == (not request.at):
        raise InvalidCommand("wake needs exactly one of in_seconds and at", field="wake")
    if request.in_seconds is not None:
        if isinstance(request.in_seconds, bool) or not isinstance(request.in_seconds, int):
            raise InvalidCommand("wake.in_seconds must be a whole number",
                                 field="wake.in_seconds")
        due = now + timedelta(seconds=request.in_seconds)
    else:
        due = datetime.fromisoformat(_iso_field(request.at, "wake.at"))
    limit = interval_of(state)
    seconds = (due - now).total_seconds()
    if not 60 <= seconds <= limit:
        raise InvalidCommand(f"a requested wake must be between 60 s and the watchdog's "
                             f"interval ({limit} s) away", field="wake")
    return one_off_wake(state, due, request.reason, now)


def one_off_wake(state: GoalState, due: datetime, reason: str, now: datetime, *,
                 requested_by: str = "") -> list[Event]:
    """A one-off wake at ``due``: the agent's own request, a job that ended
    (``dependency_ready``), or the sweeper's timeout recovery
    (``requested_by`` "liveness")."""
    data: dict[str, Any] = {"kind": "requested", "due_at": iso(due), "reason": reason}
    if requested_by:
        data["requested_by"] = requested_by
    if state.requested_wake:
        data["replaces"] = state.requested_wake["due_at"]
    if state.setting("scheduler") == INTERNAL:
        data["schedule_name"] = requested_schedule_name(state.goal_id)
        return [Event(WAKE_SCHEDULED, data, now)]
    # A host goal: only its host can schedule it. The wake is due now, so
    # the goal is ready for its agent to pull; a later one is the host's to
    # create, from the answer (recorded here for the audit).
    if due <= now:
        return [Event(WAKE_CLAIMED, {
            "occurrence_id": f"dependency:{iso(now)}", "source": HOST,
            "kind": "requested", "outcome": "ready_for_pull", "reason": reason,
            "notes": "ready: a job it waited for ended", "charge": False,
            "retry_count": state.retry_count + 1}, now)]
    return [Event(WAKE_SCHEDULED, data, now)]


# ---------------------------------------------------------------- evolve


def scheduled(state: GoalState, data: dict[str, Any], at: str) -> dict[str, Any]:
    # A repaired row gets the scheduler's lateness anew (liveness deadlines).
    repaired = {"repaired_at": at} if "repair" in data else {}
    if data.get("kind") == "reset":  # the one-off wake at a rate-limit reset
        return {"reset_wake": {"due_at": data["due_at"],
                               "schedule_name": data["schedule_name"], **repaired}}
    if data.get("kind") == "requested":  # the one-off wake the agent asked for
        return {"requested_wake": {"due_at": data["due_at"], "reason": data["reason"],
                                   "schedule_name": data.get("schedule_name", ""),
                                   **repaired}}
    watchdog = {
        "backend": data["backend"],
        "interval_seconds": data["interval_seconds"],
        "tzid": data["tzid"],
        "status": "requested",
        "attempt": data["attempt"],
        "first_due_at": data["first_due_at"],
        # Slots are anchor + k x interval; no claim ever moves the anchor.
        "anchor": data["first_due_at"],
        "next_due_at": data["first_due_at"],
        "retry_allowed": False,
    }
    if "schedule_name" in data:
        watchdog["schedule_name"] = data["schedule_name"]
    return {"watchdog": watchdog, **_host_heard(state)}


_RECEIPT_STATUS = {"created": "live", "create_failed": "create_failed",
                   "create_uncertain": "uncertain", "cancelled": "cancelled",
                   "disabled": "disabled", "user_attested_deleted": "cancelled"}


def receipted(state: GoalState, data: dict[str, Any], at: str) -> dict[str, Any]:
    if data.get("repair") == "orphaned":
        return {}  # a stray row deleted: history only, the goal's own wakes are untouched
    watchdog = {**state.watchdog, "status": _RECEIPT_STATUS[data["status"]],
                "last_receipt": data["status"], "last_receipt_at": at}
    if data["status"] == "created":
        watchdog["next_due_at"] = data["due_at"]
        if data.get("backend") == HOST:
            watchdog["anchor"] = data["due_at"]  # the host's schedule is what fires
        if "host_ref_sha256" in data:
            watchdog["host_ref_sha256"] = data["host_ref_sha256"]
            watchdog["runs_on"] = data["runs_on"]
    if data["status"] == "create_failed":
        watchdog["retry_allowed"] = data["retry_allowed"]
        if not data["retry_allowed"]:
            watchdog["status"] = "failed"
    if "repair" in data:
        watchdog["repaired_at"] = at
    return {"watchdog": watchdog, **(_host_heard(state) if data.get("backend") == HOST else {})}


def cancel_requested(state: GoalState, data: dict[str, Any], at: str) -> dict[str, Any]:
    return {"watchdog": {**state.watchdog, "status": "cancel_requested"}}


def claimed(state: GoalState, data: dict[str, Any], at: str) -> dict[str, Any]:
    outcome = data["outcome"]
    changes: dict[str, Any] = {
        "last_wake": {"occurrence_id": data["occurrence_id"], "outcome": outcome,
                      "reason": data["reason"], "at": at},
    }
    if outcome in CONSUMING:
        changes["claimed"] = [*state.claimed, data["occurrence_id"]][-CLAIM_MEMORY:]
    if state.watchdog and data.get("next_due_at"):
        changes["watchdog"] = {**state.watchdog, "next_due_at": data["next_due_at"]}
    if "retry_count" in data:
        changes["retry_count"] = data["retry_count"]
    if outcome in ("recurring_acquired", "ready_for_pull"):
        # The wake is what the pause waited for; a requested or reset wake is
        # used up by whichever wake resumed the goal.
        changes.update(paused_until="", reset_wake={}, requested_wake={})
        if state.status == PAUSED:
            changes.update(status=WAITING, reason="")  # RATE_LIMITED ends with the pause
    if outcome == "ready_for_pull":
        # ``since``: when the goal first became ready, kept across the further
        # slots that find it still unpulled (its READY_UNCLAIMED deadline).
        changes["ready"] = {"occurrence_id": data["occurrence_id"], "reason": data["reason"],
                            "at": at, "since": state.ready.get("since", at) if state.ready
                            else at, "charge": data.get("charge", False)}
    if data.get("source") == HOST:
        changes.update(_host_heard(state))
    return changes


def _host_heard(state: GoalState) -> dict[str, Any]:
    """Evidence from the host (a claim, a receipt, a new watchdog) ends HOST_SILENT."""
    if state.liveness_alert.get("reason") == "HOST_SILENT":
        return {"liveness_alert": {}}
    return {}


def finish_requested(state: GoalState, data: dict[str, Any], at: str) -> dict[str, Any]:
    return {"finish_requested": dict(data), "reason": "PENDING_NATIVE_CLEANUP"}


def job_tracked(state: GoalState, data: dict[str, Any], at: str) -> dict[str, Any]:
    job = {"job_id": data["job_id"], "kind": data["kind"], "ref": data["ref"],
           "status": "running", "conclusion": "", "tracked_at": at, "updated_at": at}
    for optional in ("notify_sha256", "link"):
        if optional in data:
            job[optional] = data[optional]
    return {"jobs": [*state.jobs, job]}


def job_updated(state: GoalState, data: dict[str, Any], at: str) -> dict[str, Any]:
    extra = {k: data[k] for k in ("link", "reported_by") if k in data}
    return {"jobs": [{**job, "status": data["status"], "conclusion": data["conclusion"],
                      "updated_at": at, **extra} if job["job_id"] == data["job_id"] else job
                     for job in state.jobs]}

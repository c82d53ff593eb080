"""One readable line per event: ``summary(kind, data)``, in plain text.

The terminal (`ledger show`, one ``event_line`` per event), the admin's
timeline and its event list show the same words. Everything here may come
from an agent, so it goes through ``terminal.clean``: one line, no control
characters.
"""

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from ledger.domain import events as ev
from ledger.domain.codec import decode_or_none
from ledger.operators.colours import FAMILY_ICONS, family, kind_colour, paint
from ledger.operators.terminal import _items, _short, clean, when

# One summary per payload class (ledger.domain.events): the stored data is
# decoded (and upcast) by the codec first, so a summary reads attributes,
# never string keys. Nested JSON (a plan, evidence items) is read defensively.

Summary = Callable[[Any], str]


def _v(value: object) -> object:
    """A field an older or damaged event lacks (decoded as None) reads "?"."""
    return "?" if value is None else value


def _started(d: ev.GoalStarted) -> str:
    plan = _items((d.checkpoint or {}).get("next_actions", []))
    policy = d.policy or {}
    text = f"“{clean(_v(d.objective), 80)}” by {clean(d.agent or '?')}"
    text += f" ({policy['scheduler']} scheduler)" if policy.get("scheduler") else ""
    return text + (f" → plan: {plan}" if plan else "")


def _ended(verb: str) -> Summary:
    def text(d: ev.GoalCompleted | ev.GoalFailed | ev.GoalBlocked) -> str:
        reason = getattr(d, "reason", "")
        said = clean(_v(d.summary), 120)
        return f"{verb}{f' ({reason})' if reason else ''}" + (f": {said}" if said else "")

    return text


def _evidence(items: object, limit: int = 5) -> str:
    """The acceptance evidence of a completion, one ``criterion ⇒ evidence`` per
    done criterion. A completion recorded before evidence existed has none."""
    items = [i for i in items if isinstance(i, Mapping)] if isinstance(items, list) else []
    if not items:
        return ""
    more = f" (+{len(items) - limit})" if len(items) > limit else ""
    return " · evidence: " + "; ".join(
        f"“{clean(i.get('criterion', '?'), 60)}” ⇒ {clean(i.get('evidence', ''), 100)}"
        for i in items[:limit]) + more


def evidence_lines(data: Mapping[str, Any]) -> list[str]:
    """`ledger show`'s block for a completed goal (the stored data of its
    goal.completed): each criterion and its evidence in full (one safe line each)."""
    completion = decode_or_none(ev.GOAL_COMPLETED, data)
    items = completion.evidence if isinstance(completion, ev.GoalCompleted) else None
    items = [i for i in items if isinstance(i, Mapping)] if isinstance(items, list) else []
    if not items:
        return [f"{'evidence:':<15}none recorded (no done criteria, or completed before "
                "evidence was required)"]
    return [f"{'evidence:' if n == 0 else '':<15}“{clean(i.get('criterion', '?'))}” ⇒ "
            f"{clean(i.get('evidence', ''))}" for n, i in enumerate(items)]


def _checkpoint(d: ev.CheckpointRecorded) -> str:
    text = f"step “{clean(_v(d.current_step), 60)}” ({_v(d.progress_pct)} %)"
    nxt = _items(d.next_actions, 2)
    text += f" → next: {nxt}" if nxt else ""
    text += f", {len(d.artifacts)} artifact(s)" if d.artifacts else ""
    text += f", {len(d.errors)} error(s)" if d.errors else ""
    return text + (f", note: {clean(_v(d.note), 60)}" if d.note else "")


def _lease(d: ev.LeaseGranted) -> str:
    text = f"gen {_v(d.generation)} to {clean(_v(d.holder))} until {_short(d.expires_at)}"
    text += " (automatic continuation)" if d.via == "wake" else ""
    if isinstance(d, ev.LeaseTakenOver):
        text += (f", taken over from gen {_v(d.previous_generation)} of "
                 f"{clean(_v(d.previous_holder))} (expired {_short(d.previous_expires_at)})")
    return text


def _scheduled(d: ev.WakeScheduled) -> str:
    if d.kind == "reset":
        return f"one-off wake at the reset, {_short(d.due_at)}"
    if d.kind == "requested":
        replaces = f" (replaces {_short(d.replaces)})" if d.replaces else ""
        return f"one-off wake asked for ({d.reason or '?'}), {_short(d.due_at)}{replaces}"
    seconds = d.interval_seconds or 0
    minutes = round(seconds / 60, 1)
    every = f"{minutes:g} min" if minutes >= 1 else f"{_v(d.interval_seconds)} s"
    retry = " (retry)" if (d.attempt or 1) > 1 else ""
    return (f"{d.backend or '?'} watchdog every {every}{retry}, first due "
            f"{_short(d.first_due_at)}")


def _receipt(d: ev.ReceiptRecorded) -> str:
    text = f"{_v(d.backend)} watchdog {_v(d.status)}"
    text += f", due {_short(d.due_at)}" if d.due_at else ""
    text += f", runs on {_v(d.runs_on)}" if d.runs_on else ""
    text += f", attested by {clean(_v(d.attested_by))}" if d.attested_by else ""
    return text + (f": {clean(_v(d.note), 80)}" if d.note else "")


def _claimed(d: ev.WakeClaimed) -> str:
    text = f"{_v(d.outcome)} ({d.reason or '?'}), {_v(d.source)}"
    if d.retry_after_seconds is not None:
        text += f", retry in {_v(d.retry_after_seconds)} s"
    if d.outcome in ("recurring_acquired", "ready_for_pull") and d.retry_count is not None:
        text += f", wake {_v(d.retry_count)} since the last checkpoint"
    if d.operator:
        text += f", by {clean(_v(d.operator))} ({clean(d.why or '', 60)})"
    return text + (f": {clean(_v(d.notes), 90)}" if d.notes else "")


def _run(d: ev.RunReported) -> str:
    if d.outcome == "ok":
        return "ok"
    if d.outcome == "note":  # the run went on: nothing paused
        text = f"noted, not ended: {_v(d.note)}" + (f" ({d.error_class})" if d.error_class else "")
        return text + (f", until {_short(d.reset_at)}" if d.reset_at else "")
    text = d.error_class or "error"
    text += f", reset {_short(d.reset_at)}" if d.reset_at else ""
    return text + (f", retry-after {clean(_v(d.retry_after))}" if d.retry_after else "")


def _dispatched(d: ev.ContinuationDispatched) -> str:
    result = "ok" if d.ok else "uncertain" if d.uncertain else "failed"
    detail = f" ({clean(_v(d.detail), 60)})" if d.detail else ""
    return f"via {clean(_v(d.dispatcher))}: {result}{detail}"


def _approval_resolved(d: ev.ApprovalResolved) -> str:
    verb = "approved" if d.decision == "approve" else "rejected"
    note = f": {clean(_v(d.note), 80)}" if d.note else ""
    return f"gate {clean(_v(d.gate))} {verb} by {clean(_v(d.operator))}{note}"


def _workspace_released(d: ev.WorkspaceReleased) -> str:
    by = "an operator" if d.by_operator else "the lease holder"
    why = f": {clean(_v(d.reason), 80)}" if d.reason else ""
    return f"{clean(_v(d.workspace), 60, keep_end=True)} released by {by}{why}"


def _job_updated(d: ev.JobUpdated) -> str:
    return (f"job {clean(_v(d.job_id))} {_v(d.status)}"
            + (" (reported by its notify token)" if d.reported_by == "notify_token" else "")
            + (f": {clean(_v(d.conclusion), 80)}" if d.conclusion else ""))


_SUMMARIES: dict[type, Summary] = {
    ev.GoalStarted: _started,
    ev.GoalCompleted: lambda d: _ended("completed")(d) + _evidence(d.evidence),
    ev.GoalFailed: _ended("failed"),
    ev.GoalBlocked: _ended("blocked"),
    ev.GoalFinishRequested: lambda d: (f"finish as {_v(d.status)} requested; waits for the host "
                                       "watchdog's cancellation"),
    ev.GoalPaused: lambda d: f"paused until {_short(d.until)} ({clean(_v(d.basis))})",
    ev.GoalStopped: lambda d: f"stopped by {clean(_v(d.operator))}: {clean(_v(d.reason), 100)}",
    ev.GoalRecovered: lambda d: (f"recovered by {clean(_v(d.operator))} from {_v(d.from_status)}/"
                                 f"{d.from_reason or '-'}: {clean(_v(d.reason), 80)}"),
    ev.WorkspaceBound: lambda d: clean(_v(d.workspace), 80, keep_end=True),
    ev.WorkspaceReleased: _workspace_released,
    ev.LeaseAcquired: _lease,
    ev.LeaseTakenOver: _lease,
    ev.LeaseRenewed: lambda d: f"gen {_v(d.generation)} renewed until {_short(d.expires_at)}",
    ev.LeaseReleased: lambda d: f"gen {_v(d.generation)} released",
    ev.LeaseExpired: lambda d: (f"gen {_v(d.generation)} of {clean(_v(d.holder))} expired at "
                                f"{_short(d.expired_at)}"),
    ev.CheckpointRecorded: _checkpoint,
    ev.WakeScheduled: _scheduled,
    ev.WakeCancelRequested: lambda d: (f"{_v(d.backend)} watchdog cancellation requested: "
                                       f"{clean(_v(d.note), 80)}"),
    ev.WakeClaimed: _claimed,
    ev.ReceiptRecorded: _receipt,
    ev.RunReported: _run,
    ev.ContinuationCharged: lambda d: f"continuation {_v(d.attempt)} of {_v(d.max)} charged",
    ev.ContinuationDispatched: _dispatched,
    ev.ApprovalRequested: lambda d: (f"gate {clean(_v(d.gate))}"
                                     + (f": {clean(_v(d.summary), 100)}" if d.summary else "")),
    ev.ApprovalResolved: _approval_resolved,
    ev.JobTracked: lambda d: (f"{clean(_v(d.kind))} {clean(_v(d.ref), 60)} "
                              f"(job {clean(_v(d.job_id))})"),
    ev.LivenessMissed: lambda d: (f"{_v(d.reason)}: {clean(_v(d.detail))} "
                                  f"(deadline {_short(d.deadline)})"),
    ev.JobUpdated: _job_updated,
    ev.ClockSteppedBack: lambda d: (f"the clock read {_v(d.ahead_seconds)} s behind the last "
                                    f"event ({_short(d.last_recorded)}): its stamps from the "
                                    "future brought back"),

    ev.ContinuationHostMade: lambda d: (
        f"{clean(_v(d.host))} continued the session itself after the reset of {_short(d.reset)} "
        f"({_v(d.trigger)})"
        + (f", against the resume policy ({_v(d.breaks_policy)})" if d.breaks_policy else "")),
    ev.ContinuationStoodDown: lambda d: (
        f"{clean(_v(d.host))}'s continuation stood down: the reset of {_short(d.reset)} was "
        f"continued already ({_v(d.continued_by)})"),
}

# Never worth a line: digests, and the data a summary already says elsewhere.
_GENERIC_SKIP = frozenset({"token_sha256", "host_ref_sha256", "notify_sha256"})


def summary(kind: str, data: Mapping[str, Any]) -> str:
    """One readable line for an event's stored data, in plain text (no colour,
    no markup).

    The data is decoded into its payload (older shapes upcast) and summarised
    from its attributes. Whatever does not decode (a kind this release does not
    know, a damaged row) falls back to ``key=value`` pairs: a summary never raises.
    """
    data = data if isinstance(data, Mapping) else {}
    payload = decode_or_none(kind, data, partial=True)
    text = _SUMMARIES.get(type(payload))
    if text is not None:
        try:
            return clean(text(payload))
        except (KeyError, TypeError, ValueError, AttributeError):
            pass  # a nested value of an unexpected shape
    return clean(", ".join(f"{k}={v}" for k, v in sorted(data.items())
                           if k not in _GENERIC_SKIP), 160)


# One line per event, for `ledger show`.

KIND_WIDTH = 23  # len("continuation.dispatched"), the longest kind
ACTOR_WIDTH = 14


def event_line(seq: int, recorded_at: datetime, kind: str, actor: str,
               data: Mapping[str, Any], *, colour: bool = False) -> str:
    """``seq  time  icon kind  actor  summary``: one line per event."""
    head = f"{FAMILY_ICONS.get(family(kind), '·')} {clean(kind, KIND_WIDTH):<{KIND_WIDTH}}"
    return (f"{seq:>7}  {paint(when(recorded_at), 'dim', colour)}  "
            f"{paint(head, kind_colour(kind), colour)}  "
            f"{clean(actor, ACTOR_WIDTH):<{ACTOR_WIDTH}}  {summary(kind, data)}")

"""The smart-wake answers: preflight at start, and the resume packet.

Preflight tells an agent, before it starts, whether its work will outlive one
turn (so it must checkpoint and rely on wakes), how long a chunk of work
should be, and by when it must flush its final checkpoint.
"""

from datetime import datetime, timedelta
from typing import Any

from ledger.domain.events import iso
from ledger.domain.parts import iso_text
from ledger.domain.state import GoalState

WAKES_THRESHOLD = 0.70  # wakes are needed when the estimate exceeds 70 % of the timeout
AUTOSAVE_RESERVE = 0.15  # flush the final checkpoint when 15 % of the window remains
CHUNK_MIN, CHUNK_MAX = 300, 900  # 5 to 15 minutes


def preflight(state: GoalState, now: datetime) -> dict[str, Any]:
    lease_seconds = state.setting("lease_seconds")
    timeout = state.timeout_seconds
    estimate = state.estimated_duration_seconds
    window = timeout or lease_seconds
    wakes_needed = None if estimate is None else estimate > WAKES_THRESHOLD * window
    # A quarter of the window, within 5-15 minutes; a window shorter than ten
    # minutes gets half of itself so at least two checkpoints fit.
    chunk = min(CHUNK_MAX, max(CHUNK_MIN, window // 4))
    if window < 2 * CHUNK_MIN:
        chunk = max(60, window // 2)
    deadlines = []
    if timeout:
        deadlines.append(now + timedelta(seconds=timeout * (1 - AUTOSAVE_RESERVE)))
    if state.lease is not None:
        deadlines.append(state.lease.expires_at
                         - timedelta(seconds=lease_seconds * AUTOSAVE_RESERVE))
    return {
        "wakes_needed": wakes_needed,
        "wakes_threshold_pct": int(WAKES_THRESHOLD * 100),
        "estimated_duration_seconds": estimate,
        "timeout_seconds": timeout,
        "suggested_chunk_seconds": chunk,
        "autosave_reserve_pct": int(AUTOSAVE_RESERVE * 100),
        "autosave_deadline": iso(min(deadlines)) if deadlines else None,
    }


def resume_packet(state: GoalState) -> dict[str, Any]:
    """What a resumed agent needs and nothing else: where it stands, exactly
    what to do next, how to know it is done, and what to verify before going on."""
    return {
        "task_id": state.goal_id,
        "objective": state.objective,
        "done_criteria": list(state.done_criteria),
        "status": state.status,
        "checkpoint": {
            "current_step": state.current_step,
            "progress_pct": state.progress_pct,
            "last_completed": list(state.last_completed),
            "next_actions": list(state.next_actions),
            "errors": list(state.errors),
            "updated_at": iso_text(state.checkpoint_time),
            "version": state.version,
        },
        "next_actions": list(state.next_actions),
        "artifacts_to_verify": [dict(a) for a in state.artifacts],
        # The blocking jobs, newest last, with how they ended: a goal woken
        # because a dependency is ready learns which one, and where to look.
        "jobs": [{k: job[k] for k in ("job_id", "kind", "ref", "status", "conclusion",
                                      "link", "updated_at") if k in job}
                 for job in state.jobs[-10:]],
        "wake_reason": ((state.ready.reason if state.ready is not None else "")
                        or (state.last_wake.reason if state.last_wake is not None else "")),
        # Jobs still running when the goal was resumed: the holder that
        # tracked them is gone, so nobody knows how they went. Inspect each
        # (its exact ref) and report its status before starting it again.
        "jobs_to_inspect": [
            {"job_id": job["job_id"], "kind": job["kind"], "ref": job["ref"],
             "status": "unknown", "tracked_at": job["tracked_at"],
             **({"link": job["link"]} if "link" in job else {}),
             "do": f"inspect {job['kind']} {job['ref']} and report its status "
                   f"(POST …/jobs/{job['job_id']}/status) before running it again"}
            for job in state.running_jobs()],
    }


# The wording a resumed agent reads, written once: the server's dispatchers,
# ``wakeledger supervise`` and the Claude Code hook all tell it this way.
LEASE_IN_ENVIRONMENT = ("Your lease is in the environment: WAKELEDGER_LEASE_TOKEN / "
                        "WAKELEDGER_LEASE_GENERATION (API: WAKELEDGER_URL).")
# Inside a host that runs the turn in a long-lived process of its own (the
# OpenClaw Gateway), the dispatched command hands the lease to the host's
# Wake Ledger tools (``wakeledger mcp --share-leases``): the model never sees
# an environment variable, and each tool adds the lease to its call.
LEASE_WITH_HOST_TOOLS = ("Your lease is held for you by the wakeledger MCP tools in this "
                         "session (not in environment variables): call "
                         "wakeledger__checkpoint_goal and wakeledger__finish_goal with the "
                         "goal_id only; they add the lease.")


def packet_lines(packet: dict[str, Any]) -> list[str]:
    """Where the work stands, from a resume packet: the latest checkpoint,
    the next actions, when it is done, and what to verify before going on."""
    checkpoint = packet.get("checkpoint") or {}
    lines = [
        f"Latest checkpoint: {checkpoint.get('current_step') or '(none)'} "
        f"({checkpoint.get('progress_pct', 0)} %).",
        "Next actions: " + ("; ".join(packet.get("next_actions") or []) or "(none recorded)"),
        "Done when: " + ("; ".join(packet.get("done_criteria") or []) or "(not stated)"),
    ]
    if packet.get("artifacts_to_verify"):
        lines.append("Verify before continuing: " + ", ".join(
            f"{a['path']} (sha256 {a['sha256'][:12]}…)" for a in packet["artifacts_to_verify"]))
    return lines


def lease_hint_moved(prompt: str, lease_hint: str) -> str:
    """A resume prompt told where its lease went since it was written (a
    dispatched command handed it on): the environment's hint replaced."""
    if LEASE_IN_ENVIRONMENT in prompt:
        return prompt.replace(LEASE_IN_ENVIRONMENT, lease_hint)
    return f"{prompt}\n{lease_hint}"


def resume_prompt(packet: dict[str, Any], goal_id: str, *,
                  lease_hint: str = LEASE_IN_ENVIRONMENT) -> str:
    """The message a resumed agent gets: what to do, from where, and how.
    ``lease_hint`` says where the lease is (the environment, a request's
    body, or: take it yourself)."""
    return "\n".join([f"Resume Wake Ledger goal {goal_id}: {packet.get('objective', '')}",
                      *packet_lines(packet),
                      lease_hint + " Checkpoint after each verified step and stop on lease_lost."])

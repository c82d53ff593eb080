"""The host continued a goal's session by itself (docs/agents.md, "One
continuation per reset"): one use case, called by the API, the CLI (through
the API), Claude Code's hooks and the OpenClaw plugin."""

import uuid
from typing import Any

from ledger.domain.continuations import HOST_CONTINUED, HostContinued, recorded_answer
from ledger.eventstore import clock
from ledger.services.answers import holds, lease_answer
from ledger.services.caller import Caller, run
from ledger.services.tokens import digest


def host_continued(caller: Caller, goal_id: str | uuid.UUID, token: str, *, host: str,
                   trigger: str, session_key: str = "") -> dict[str, Any]:
    """Record that ``host`` continued the goal's session by itself, under the
    goal's lock: the reset's one continuation (the lease goes to ``token``),
    a stand-down (another continuation of that reset came first), or no
    reset's continuation at all (nothing recorded)."""
    digest_ = digest(token)
    command = HostContinued(host, trigger, caller.name, digest_, session_key)
    outcome = run(caller, goal_id, command)
    state = outcome.state
    answer = recorded_answer([event.payload for event in outcome.events], state, command,
                             clock.now())
    body: dict[str, Any] = {
        "outcome": answer.outcome, "notes": answer.notes, "reset": answer.reset or None,
        "continued_by": answer.continued_by or None,
        "breaks_policy": answer.breaks_policy or None,
        "retry_after_seconds": answer.retry_after_seconds}
    if answer.outcome == HOST_CONTINUED:
        body.update(lease_answer(state, holds(state, digest_), token, outcome.events))
        body["retry_after_seconds"] = answer.retry_after_seconds
    return body

"""How a goal is shown: the body GET /goals/{id} answers (and every answer
that embeds a goal), its watchdog, its jobs, and where it stands (liveness,
the next expected evidence, the alert) — the admin's page reads the same.
Built here once from the domain's rules; a shell only serializes it."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ledger.domain import GoalState, liveness
from ledger.domain.leases import lease_live
from ledger.domain.parts import ProviderWait, iso_text
from ledger.domain.runs import provider_wait
from ledger.domain.timing import next_wake_at
from ledger.domain.watchdogs import watchdog_health
from ledger.eventstore import clock


@dataclass(frozen=True, slots=True)
class Standing:
    """Where a goal stands now: its liveness label, the next evidence expected
    (and by when), the alert that needs a human (None), and its watchdog's health."""

    liveness: str
    expected: dict[str, Any]
    alert: str  # "" when nobody is needed
    watchdog_health: str

    @classmethod
    def of(cls, state: GoalState, now: datetime) -> "Standing":
        return cls(liveness.label(state, now), liveness.expectation(state).as_dict(),
                   liveness.alert(state, now), watchdog_health(state))


def goal_body(state: GoalState) -> dict[str, Any]:
    # The state as JSON (parts as their stored dicts, times as ISO text): the
    # shape the API has always shown, changed below only where it says so.
    body = state.to_dict()
    body["id"] = body.pop("goal_id")
    lease = body.pop("lease")
    now = clock.now()
    # The token digest stays inside: callers prove the token, they never read it.
    # "active" is shown as a reader takes it (live now); the stored flag of
    # that name (the uncertain-attempt rule: a sign of life since the grant) is heard_from_holder.
    body["lease"] = ({**{k: v for k, v in lease.items() if k not in ("token_sha256", "active")},
                      "active": lease_live(state, now),
                      "heard_from_holder": bool(lease.get("active"))}
                     if lease else None)
    body["watchdog"] = watchdog_body(state)
    body["next_wake_at"] = iso_text(next_wake_at(state)) or None
    standing = Standing.of(state, now)
    body["liveness"] = standing.liveness
    body["expected"] = standing.expected
    reason = standing.alert
    body["alert"] = {"reason": reason, "why": liveness.why(reason)} if reason else None
    body.pop("liveness_alert")  # shown as ``alert``
    body.pop("claimed")  # bookkeeping for already_claimed
    body.pop("unclaimed")  # bookkeeping for a clock stepped back (clocksteps)
    body["jobs"] = [job_body(job) for job in state.jobs]
    # Running, but waiting inside the host's own retry for the provider's reset.
    body["provider_wait"] = shown_wait(provider_wait(state, now))
    return body


def shown_wait(wait: ProviderWait | None) -> dict[str, Any] | None:
    """A provider wait as answers show it (its lease's generation stays inside)."""
    if wait is None:
        return None
    stored = wait.stored()
    return {k: stored[k] for k in ("class", "until", "since")}


def watchdog_body(state: GoalState) -> dict[str, Any] | None:
    if state.watchdog is None:
        return None
    shown = {k: v for k, v in state.watchdog.stored().items() if k != "host_ref_sha256"}
    return {**shown, "health": watchdog_health(state)}


def job_body(job: dict[str, Any]) -> dict[str, Any]:
    """A job as shown: its notify token's digest stays inside."""
    return {k: v for k, v in job.items() if k != "notify_sha256"}


@dataclass(frozen=True)
class GoalAnswer:
    """An answer that is the goal itself (approvals, stop, recover)."""

    state: GoalState

    def as_dict(self) -> dict[str, Any]:
        return goal_body(self.state)

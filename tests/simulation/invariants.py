"""What must hold after every step of the simulation (docs/design.md, "Rules
(what `decide` enforces)" and "Wakes and claims").

Two kinds of check live here, both independent of how the product decides:

* ``GoalMonitor`` reads one goal's events as they are appended and checks the
  safety rules against the history itself: one live lease, fencing, exactly-once
  occurrences, the continuation budget (and that only recovery continuations
  are charged), no crossed approval gate, verified completion.
* Liveness is judged by evidence, in the world's checks:
  no active goal goes past its own deadline unless /alerts lists it.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

TERMINAL = frozenset({"done", "failed", "stopped"})
WATCHDOG_LIVE = frozenset({"requested", "live", "uncertain", "disabled", "cancel_requested"})

# Invariant names, as the tests and the report use them.
ONE_LIVE_LEASE = "one_live_lease"
FENCING = "fencing"
EXACTLY_ONCE = "exactly_once_occurrences"
BUDGET = "budget_never_exceeded"
CHARGED_ONLY_RECOVERY = "only_recovery_is_charged"
NO_CROSSED_GATE = "no_crossed_gate"
VERIFIED_COMPLETION = "verified_completion"
INTERRUPTED_ONLY_AFTER_SILENCE = "interrupted_only_after_silence"
PULL_WAKES = "no_lease_to_nobody"
LIVENESS = "liveness"
# Judged from outside: unlisted in /alerts with no progress beyond
# the world's own bound (the headline figure).
UNSEEN = "unlisted_without_progress"
DOCTOR = "doctor_consistency"
SWEPT = "expired_leases_swept"
NO_DRIFT = "no_drift"
PROGRESS = "progress"
REPLAY = "replay_equals_projection"
CHAIN = "chain_verifies"
OPERATOR_CAN_RECOVER = "operator_can_recover"
# The goals-by-status tallies /metrics reads equal a COUNT of the
# goal table, whatever the world did (crashes, outages, sweeps, repairs).
TALLIES = "goal_tallies_equal_a_count"

ALL = (ONE_LIVE_LEASE, FENCING, EXACTLY_ONCE, BUDGET, CHARGED_ONLY_RECOVERY, NO_CROSSED_GATE,
       VERIFIED_COMPLETION, INTERRUPTED_ONLY_AFTER_SILENCE, PULL_WAKES, LIVENESS, DOCTOR, SWEPT,
       NO_DRIFT, PROGRESS, REPLAY, CHAIN, OPERATOR_CAN_RECOVER, UNSEEN, TALLIES)


@dataclass
class Violation:
    invariant: str
    goal_id: str
    at: datetime
    message: str
    trace: str = ""

    def headline(self) -> str:
        return f"{self.invariant}: goal {self.goal_id[:8]} at {self.at:%Y-%m-%d %H:%M:%S}: " \
               f"{self.message}"


@dataclass
class GoalMonitor:
    """Folds one goal's appended events, independently of the product's evolve,
    and reports what breaks a safety rule."""

    goal_id: str
    seen: int = 0  # last seq checked
    grace: int = 60
    max_continuations: int = 3
    lease: dict[str, Any] = field(default_factory=dict)
    generation: int = 0
    gates: set[str] = field(default_factory=set)
    running_jobs: set[str] = field(default_factory=set)
    watchdog: str = ""
    granted: set[str] = field(default_factory=set)
    charged: int = 0
    # Whether the last attempt ended cleanly (checkpoint + release_lease): a
    # wake after that is scheduled progress, which the continuation budget does not charge. An
    # attempt still holding its lease has not ended cleanly (a wake that takes
    # it over is a recovery); None: not judged (an approval ended it).
    clean: bool | None = None
    last_kind: str = ""
    granted_wakes: int = 0
    status: str = ""
    reason: str = ""
    # (generation of the lease that was current) for each INTERRUPTED_UNKNOWN block
    interrupted: list[int] = field(default_factory=list)
    new_leases: list[tuple[int, str]] = field(default_factory=list)  # (generation, via)
    done_criteria: list[str] = field(default_factory=list)

    def feed(self, event: dict[str, Any]) -> list[tuple[str, str]]:
        """Check one event; answer (invariant, message) for each broken rule."""
        found: list[tuple[str, str]] = []
        kind, data, at = event["kind"], event["data"], event["recorded_at"]
        self.seen = event["seq"]
        generation = data.get("generation")
        fenced = kind in ("checkpoint.recorded", "lease.renewed", "lease.released")
        if fenced and (not self.lease or generation != self.lease["generation"]):
            found.append((FENCING, f"{kind} with generation {generation} accepted while the "
                                   f"current lease is {self.lease.get('generation')}"))
        if self.gates and kind in ("lease.acquired", "lease.taken_over", "checkpoint.recorded"):
            found.append((NO_CROSSED_GATE, f"{kind} while approval gate(s) "
                                           f"{sorted(self.gates)} are pending"))
        if kind == "goal.started":
            policy = data["policy"]
            self.grace = policy.get("stale_grace_seconds", 60)
            self.max_continuations = policy.get("max_continuations", 3)
            self.done_criteria = list(dict.fromkeys(data.get("done_criteria", [])))
            self.status = "waiting"
        elif kind in ("lease.acquired", "lease.taken_over"):
            if kind == "lease.acquired" and self.lease:
                found.append((ONE_LIVE_LEASE, f"lease.acquired (generation "
                                              f"{data['generation']}) while generation "
                                              f"{self.lease['generation']} is still recorded"))
            if kind == "lease.taken_over":
                stale = _at(data["previous_expires_at"]) + timedelta(seconds=self.grace)
                if at < stale:
                    found.append((ONE_LIVE_LEASE, f"lease taken over at {at:%H:%M:%S}, before "
                                                  f"the previous one went stale at "
                                                  f"{stale:%H:%M:%S}"))
            if data["generation"] <= self.generation:
                found.append((FENCING, f"generation {data['generation']} handed out again "
                                       f"(last was {self.generation})"))
            self.generation = data["generation"]
            self.lease = {"generation": data["generation"], "expires_at": data["expires_at"]}
            self.new_leases.append((data["generation"], data.get("via", "agent")))
            self.status = "running"
            self.clean = False
        elif kind == "lease.renewed":
            if self.lease:
                self.lease["expires_at"] = data["expires_at"]
        elif kind in ("lease.released", "lease.expired"):
            self.clean = kind == "lease.released" and self.last_kind == "checkpoint.recorded"
            self.lease = {}
        elif kind == "run.reported":
            if data.get("outcome") == "error":
                self.clean = False
        elif kind == "goal.paused":
            self.clean = False
        elif kind == "approval.requested":
            self.gates.add(data["gate"])
            self.lease = {}
            self.clean = None
        elif kind == "approval.resolved":
            self.gates.discard(data["gate"])
        elif kind == "job.tracked":
            self.running_jobs.add(data["job_id"])
        elif kind == "job.updated":
            self.running_jobs.discard(data["job_id"])
        elif kind == "wake.scheduled" and data.get("kind") != "reset":
            self.watchdog = "requested"
        elif kind == "receipt.recorded":
            self.watchdog = {"created": "live", "create_failed": "create_failed",
                             "create_uncertain": "uncertain", "cancelled": "cancelled",
                             "disabled": "disabled",
                             "user_attested_deleted": "cancelled"}[data["status"]]
        elif kind == "wake.cancel_requested":
            self.watchdog = "cancel_requested"
        elif kind == "wake.claimed":
            if data["outcome"] == "recurring_acquired":
                occurrence = data["occurrence_id"]
                if occurrence in self.granted:
                    found.append((EXACTLY_ONCE, f"occurrence {occurrence} granted twice"))
                self.granted.add(occurrence)
                self.granted_wakes += 1
        elif kind == "continuation.charged":
            self.charged = data["attempt"]
            if self.charged > self.max_continuations:
                found.append((BUDGET, f"continuation {self.charged} charged with a budget of "
                                      f"{self.max_continuations}"))
            if self.clean:
                found.append((CHARGED_ONLY_RECOVERY,
                              f"continuation {data['attempt']}/{data['max']} charged for a "
                              "wake after a clean release (scheduled progress; the "
                              "continuation budget)"))
        elif kind == "goal.recovered":
            for job_id in data.get("written_off_jobs", ()):
                self.running_jobs.discard(job_id)
            self.charged = 0
            self.clean = False
            self.status = "waiting"
            self.lease = {}
        elif kind == "goal.completed":
            if self.running_jobs:
                found.append((VERIFIED_COMPLETION, f"completed with {len(self.running_jobs)} "
                                                   "blocking job(s) running"))
            if self.watchdog in WATCHDOG_LIVE:
                found.append((VERIFIED_COMPLETION, f"completed with its watchdog "
                                                   f"{self.watchdog}"))
            # Verified completion: a summary, and evidence for each done criterion.
            shown = [item.get("criterion") for item in data.get("evidence", [])]
            if not data.get("summary", "").strip() or shown != self.done_criteria:
                found.append((VERIFIED_COMPLETION, f"completed with evidence for {shown}, "
                                                   f"not for the criteria {self.done_criteria}"))
        if kind in ("goal.completed", "goal.failed", "goal.blocked", "goal.stopped"):
            if kind == "goal.blocked" and data.get("reason") == "INTERRUPTED_UNKNOWN":
                self.interrupted.append(self.generation)
            self.status = {"goal.completed": "done", "goal.failed": "failed",
                           "goal.blocked": "blocked", "goal.stopped": "stopped"}[kind]
            self.reason = data.get("reason", "")
            self.lease = {}
        self.last_kind = kind
        return found


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value)

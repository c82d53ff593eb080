"""GoalState: the projection folded from a goal's events (docs/design.md, "Goal state")."""

from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime
from typing import Any

from ledger.domain.events import iso
from ledger.domain.parts import (
    PARTS,
    Continued,
    LastWake,
    Lease,
    LivenessAlert,
    OneOffWake,
    ProviderWait,
    Ready,
    Watchdog,
    iso_text,
)

# Statuses
RUNNING = "running"  # a live lease
WAITING = "waiting"  # no live lease; a wake will resume it
PAUSED = "paused"  # rate limited until paused_until
BLOCKED = "blocked"  # needs a human; reason says why
DONE = "done"
FAILED = "failed"
STOPPED = "stopped"

STATUSES = (RUNNING, WAITING, PAUSED, BLOCKED, DONE, FAILED, STOPPED)
TERMINAL_STATUSES = frozenset({DONE, FAILED, STOPPED})
ACTIVE_STATUSES = tuple(s for s in STATUSES if s not in TERMINAL_STATUSES)

# Why a paused goal is paused: it is the only cause (the failure rule), but an empty
# reason told a reader of the API, the admin or `ledger goals` nothing.
RATE_LIMITED = "RATE_LIMITED"
# Why a rate-limited goal blocked instead: its continuation budget was spent.
RATE_LIMIT_STOPPED = "RATE_LIMIT_STOPPED"
# An alert, not a status: a pause to a reset days away, listed once it has
# lasted the server's long_pause_minutes, so a person decides whether to wait.
LONG_PAUSE = "LONG_PAUSE"

# Reasons (from the source systems), plus AGENT_BLOCKED for an agent that
# finished its goal as blocked itself, and RATE_LIMITED while paused.
REASONS = (
    "BLOCKED_APPROVAL",
    RATE_LIMIT_STOPPED,
    "AUTH_FAILED",
    "OWNER_VERIFICATION",
    "UNCLASSIFIED",
    "REQUEST_TOO_LARGE",
    "INTERRUPTED_UNKNOWN",
    "SESSION_CHANGED",
    "SESSION_ACTIVITY",
    "WAKE_RETRIES_EXHAUSTED",
    "CONTINUATION_STOPPED",
    "PENDING_NATIVE_CLEANUP",
    "AGENT_BLOCKED",
    "APPROVAL_REJECTED",
    "READY_UNCLAIMED",
    RATE_LIMITED,
)

_UNSET: Any = object()


# Frozen, and without __slots__: a state is copied once per event (``but``),
# and copying an instance __dict__ is one C call where slots are copied one
# setattr at a time (five times the cost, a third of a replay).
@dataclass(frozen=True)
class GoalState:
    """Everything a goal is: its records as frozen values
    (``ledger.domain.parts``, None when it has none), its times as aware
    datetimes (None when unset), the rest plain JSON-able values.

    Frozen: ``evolve`` returns a new state, so a refused command can never have
    half-changed the one it was decided on. Stored, it is JSON (``to_stored``
    and ``from_dict``); shown, too (``to_dict``).
    """

    goal_id: str = ""
    workspace: str = ""
    goal_key: str = ""
    objective: str = ""
    done_criteria: list[str] = field(default_factory=list)
    agent: str = ""
    status: str = ""  # "" until goal.started
    reason: str = ""
    current_step: str = ""
    progress_pct: int = 0
    last_completed: list[str] = field(default_factory=list)
    next_actions: list[str] = field(default_factory=list)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    retry_count: int = 0
    checkpoints: int = 0
    policy: dict[str, Any] = field(default_factory=dict)
    session: dict[str, Any] = field(default_factory=dict)
    timeout_seconds: int | None = None
    estimated_duration_seconds: int | None = None
    workspace_bound: bool = False
    # The live lease (None when none): holder, generation, token_sha256 (never
    # the raw token), acquired_at, expires_at, last_heartbeat_at, via, active.
    lease: Lease | None = None
    # The last generation handed out; survives a release, so the next holder
    # always gets a higher one and an old holder is always fenced off.
    lease_generation: int = 0
    paused_until: datetime | None = None  # set by a rate limit (docs/failures.md)
    # When the latest pause began: a pause to a reset days away is listed
    # LONG_PAUSE once it has lasted the server's long_pause_minutes.
    paused_at: datetime | None = None
    lease_end: str = ""  # how the last lease ended: released, expired, finished
    last_checkpoint_seq: int = 0
    # When the latest checkpoint (the start's plan, or a recorded one) was
    # made: the resume packet's and the checkpoint contract's updated_at,
    # which later events (a lease, a pull) must not move.
    checkpointed_at: datetime | None = None
    # Since when the goal's progress is counted (its progress deadline,
    # ledger.domain.liveness): the last checkpoint, or the last moment it was
    # given a fresh start without one — an operator's recovery or approval, the
    # end of a pause, a blocking job's end. "" in projections stored before it
    # existed: the checkpoint time stands in.
    progress_since: datetime | None = None
    # What the goal went through since its last progress (ledger.domain.progress):
    # lease grants, empty turns, checkpoints that changed nothing, job ends,
    # and when its one credited job wait ended. {} after progress.
    since_progress: dict[str, Any] = field(default_factory=dict)
    # The last few checkpoints that were progress, as fingerprints
    # (``progress.fingerprint``): coming back to one of them is a loop
    # (A, B, A, B…), not progress.
    recent_progress: list[str] = field(default_factory=list)
    # The one watchdog (None when never prepared): backend, interval_seconds,
    # tzid, status, schedule_name, host_ref_sha256, runs_on, next_due_at, …
    watchdog: Watchdog | None = None
    claimed: list[str] = field(default_factory=list)  # recent wake occurrence ids
    last_wake: LastWake | None = None
    jobs: list[dict[str, Any]] = field(default_factory=list)
    finish_requested: dict[str, Any] = field(default_factory=dict)
    continuations_used: int = 0  # automatic continuations charged (the continuation budget)
    rate_limits: int = 0  # consecutive rate limits: the backoff's exponent
    pending_approvals: list[dict[str, Any]] = field(default_factory=list)
    reset_wake: OneOffWake | None = None  # the one-off wake at a reset
    # The one-off wake the agent asked for at its turn boundary (due_at, reason,
    # schedule_name); a later request replaces it.
    requested_wake: OneOffWake | None = None
    # A due wake waiting for its agent to pull it (dispatcher "none"):
    # occurrence_id, reason, at, charge (a recovery continuation, the continuation budget).
    ready: Ready | None = None
    # The due wake a READY_UNCLAIMED block ended, its ``at`` the block's time
    # (None otherwise): a clock stepped back withdraws a block judged while
    # the clock ran ahead and makes the wake ready again
    # (ledger.domain.clocksteps). Left as it is after an operator's recovery:
    # only a goal still blocked READY_UNCLAIMED is given it back.
    unclaimed: Ready | None = None
    # The last continuation of a rate-limit reset, whoever made it (a wake, a
    # pull, the host by itself): reset, by (the lease's via), at, generation.
    # A second continuation of the same reset stands down against it.
    continued: Continued | None = None
    # The reset a person approved continuing (resume policy "ask").
    resume_approved: datetime | None = None
    # A missed deadline that needs a human to look but does not block the goal
    # (HOST_SILENT): reason, at, detail. Cleared by the evidence it waited for.
    liveness_alert: LivenessAlert | None = None
    # The running agent's host waits inside its own retry for a provider's
    # reset (None when it does not): class, until, since, generation (of the
    # lease it waits under). Shown only while that lease holds and the reset
    # is ahead (ledger.domain.runs.provider_wait).
    provider_wait: ProviderWait | None = None
    summary: str = ""
    created_at: datetime | None = None
    updated_at: datetime | None = None
    version: int = 0  # seq of the last event folded in

    @property
    def started(self) -> bool:
        return bool(self.status)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def session_key(self) -> str:
        return self.session.get("session_key", "")

    def zone(self, given: str = "") -> str:
        """The IANA zone a wall-clock time of this goal is read in: the one
        given, else the session's, else UTC (the one place of the fallback)."""
        return given or self.session.get("timezone") or "UTC"

    def setting(self, name: str) -> Any:
        """A policy setting, or its default (for goals started before it existed):
        the one place a default is read."""
        value = self.policy.get(name, _UNSET)
        if value is _UNSET:
            # Imported here, only for a policy without the setting: policy
            # imports this module's users, and an import statement on every
            # call cost more than the lookup (three per command).
            from ledger.domain.policy import DEFAULT_POLICY

            return DEFAULT_POLICY[name]
        return value

    @property
    def scheduler_backend(self) -> str:
        """Who fires this goal's wakes (internal or host): its watchdog's
        backend once it has one, else the policy's choice (the one place of
        the fallback: liveness, the sweeper's checks and the answers read it)."""
        return self.watchdog.backend if self.watchdog else self.setting("scheduler")

    @property
    def interval_seconds(self) -> int:
        """The watchdog's interval: the armed watchdog's own, else the one
        frozen into the policy at start, else the cadence (the one place)."""
        return ((self.watchdog.interval_seconds if self.watchdog else 0)
                or self.policy.get("interval_seconds") or self.setting("cadence_minutes") * 60)

    @property
    def alert_reason(self) -> str:
        """The standing liveness alert's reason ("" when none)."""
        return self.liveness_alert.reason if self.liveness_alert is not None else ""

    @property
    def watchdog_status(self) -> str:
        """The watchdog's status ("" when it was never prepared)."""
        return self.watchdog.status if self.watchdog is not None else ""

    def seen_by(self, owner: str | None) -> bool:
        """Who may see the goal: everyone but an agent (``owner`` None: an
        operator, an auditor, the scheduler), and its own agent. Another
        agent's goal does not exist for it (a 404, never a 403)."""
        return owner is None or self.agent == owner

    def running_jobs(self) -> list[dict[str, Any]]:
        """Blocking jobs still running: they keep a goal from finishing."""
        return [job for job in self.jobs if job["status"] == "running"]

    def artifact(self, path: str) -> dict[str, Any] | None:
        for artifact in self.artifacts:
            if artifact["path"] == path:
                return artifact
        return None

    def checkpoint_contract(self) -> dict[str, Any]:
        return {
            "task_id": self.goal_id,
            "goal": self.objective,
            "status": self.status,
            "current_step": self.current_step,
            "progress_pct": self.progress_pct,
            "last_completed": list(self.last_completed),
            "next_actions": list(self.next_actions),
            "artifacts": [dict(a) for a in self.artifacts],
            "errors": list(self.errors),
            "retry_count": self.retry_count,
            "updated_at": iso_text(self.checkpoint_time),
        }

    @property
    def checkpoint_time(self) -> datetime | None:
        """When the latest checkpoint was made. A projection stored before
        ``checkpointed_at`` existed has none until its next checkpoint (or
        `ledger replay --fix`): its last update is the best it knows."""
        return self.checkpointed_at or self.updated_at

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON, in declaration order: a part as the dict it is
        stored as ({} for none), a time as ``events.iso`` writes it ("" for
        none). The one place a state is turned into what the API, the admin
        and the terminal show (they showed the stored shape before the parts
        were values, and still do, byte for byte)."""
        out = self.__dict__.copy()
        for name in _PART_FIELDS:
            part = out[name]
            # A copy: a part's stored dict is its own (and the row's).
            out[name] = dict(part.stored()) if part is not None else {}
        for name in TIME_FIELDS:
            moment = out[name]
            out[name] = iso(moment) if moment is not None else ""
        return out

    def to_stored(self) -> dict[str, Any]:
        """The projection as the goal row stores it: the fields that differ
        from their defaults, in declaration order (``from_dict`` gives the
        rest back), each as JSON (a part as its dict, a time as ISO text:
        ``to_dict``'s shape). A working goal leaves about half its fields
        empty; leaving them out takes ~500 of ~1,800 bytes off every
        command's write of the row (PostgreSQL's WAL, the JSON encoded and
        decoded). The type counts too: a stored ``0`` must not come back as a
        default ``False``. Every default is empty (checked below), so an
        empty value of its default's type is the default: a truth test
        first, the cheap way out."""
        # A part written before is its stored dict again; each instant is
        # formatted once (a command's own time is most of them).
        out: dict[str, Any] = {}
        texts: dict[datetime, str] = {}
        for name, value in self.__dict__.items():
            if value or type(value) is not _DEFAULT_TYPES[name]:
                if name in _PART_NAMES:
                    value = value.stored(texts)
                elif name in _TIME_NAMES:
                    if value in texts:
                        value = texts[value]
                    else:
                        value = texts[value] = iso(value)
                out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GoalState":
        # Unknown keys are ignored and missing ones take their defaults, so a
        # projection stored by an older release still loads (replay then
        # rewrites it in full). What __init__ would make, in the same order,
        # without its fifty object.__setattr__ calls (a third of the cost):
        # every read of a goal and every command that finds no cached state.
        # A part's dict becomes its value and an ISO time a datetime; an empty
        # one ({} or "", as a row read with its defaults filled in has) None.
        values = FIELD_DEFAULTS.copy()
        for name, value in data.items():
            if name in _PLAIN_NAMES:
                values[name] = value
            elif not value or name not in _FIELD_NAMES:
                continue  # an empty part or time (None), a key of no field
            elif name in _TIME_NAMES:
                values[name] = _parse(value)
            else:
                values[name] = PARTS[name].of(value)
        for name, factory in _FACTORIES:
            if values[name] is FIELD_DEFAULTS[name]:
                values[name] = factory()  # a fresh empty list or dict, as default_factory
        state = _new(cls)
        _set(state, "__dict__", values)
        return state

    def but(self, **changes: Any) -> "GoalState":
        """A copy with ``changes`` (field names only, as ``replace`` checks)."""
        if not _FIELD_NAMES.issuperset(changes):  # no set built when all are fields
            unknown = changes.keys() - _FIELD_NAMES
            raise TypeError(f"GoalState has no field {', '.join(sorted(unknown))}")
        # evolve copies the state once per event: dataclasses.replace (getattr
        # per field, then the frozen __init__) costs ten times this copy of the
        # instance dict, which keeps the fields' order.
        copy = _new(GoalState)
        _set(copy, "__dict__", {**self.__dict__, **changes})
        return copy


# Computed once: fields() walks the class on every call, and the store folds
# a state in and out of JSON on every command.
_FIELD_ORDER = tuple(f.name for f in fields(GoalState))
_FIELD_NAMES = frozenset(_FIELD_ORDER)
_new = object.__new__
_set = object.__setattr__  # what the frozen dataclass's own __init__ uses
# Every field at its default: what a stored state leaves out (to_stored).
FIELD_DEFAULTS: dict[str, Any] = dict(GoalState().__dict__)
if any(FIELD_DEFAULTS.values()):  # to_stored's rule leans on it
    raise TypeError("every GoalState default must be empty for to_stored")
_DEFAULT_TYPES = {name: type(value) for name, value in FIELD_DEFAULTS.items()}
# The fields that hold a part (ledger.domain.parts) or a time, and how each
# is turned into JSON and back.
_PART_FIELDS = tuple(name for name in _FIELD_ORDER if name in PARTS)
TIME_FIELDS = tuple(f.name for f in fields(GoalState) if "datetime" in str(f.type))
_PART_NAMES = frozenset(_PART_FIELDS)
_TIME_NAMES = frozenset(TIME_FIELDS)
_PLAIN_NAMES = _FIELD_NAMES - _PART_NAMES - _TIME_NAMES
_parse = datetime.fromisoformat
# Every field at its default as JSON (``to_dict``): what a stored row read
# with its defaults filled in has ({} for a part, "" for a time).
JSON_DEFAULTS: dict[str, Any] = GoalState().to_dict()
# The fields with a default_factory (every list and dict): never shared.
_FACTORIES = tuple((f.name, f.default_factory) for f in fields(GoalState)
                   if f.default_factory is not MISSING)

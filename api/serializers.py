"""Request and response shapes. Requests are strict: an unknown field is a 400.

These check types and sizes so each bad field gets its own message; the
domain checks the same limits again (it is the authority for every shell).
"""

from typing import Any

from django.utils.functional import cached_property
from rest_framework import serializers
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from ledger import clock
from ledger.domain import resets
from ledger.domain import validation as limits
from ledger.domain.commands import FINISH_STATUSES
from ledger.domain.liveness import LABELS
from ledger.domain.policy import RANGES, SCHEDULERS
from ledger.domain.state import REASONS, STATUSES


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know: a typo must not be silently ignored."""

    # (A comment, not the docstring: drf-spectacular publishes docstrings.)
    # A request serializer validating a body (``Serializer(data=...)``, no
    # instance, context or partial) reuses one bound field tree per class
    # instead of DRF's deep copy of every declared field, nested ones
    # included, per instance (about 2/3 of validating a checkpoint). The
    # tree's root is a prototype of the class built the same way (no instance,
    # context or partial), so a field asking its root or parent for those
    # sees what it would have seen. Validation keeps its state in locals and
    # on the serializer instance (``_errors``, ``_validated_data``), never on
    # the fields; the fields' own lazy caches (``validators``, a nested
    # serializer's ``fields``) fill once, with the same values each time.

    @cached_property
    def fields(self) -> Any:
        cls = type(self)
        if (self.instance is not None or self.partial or self._context
                or not hasattr(self, "initial_data") or self.parent is not None):
            return super().fields
        prototype = cls.__dict__.get("_prototype")
        if prototype is None:
            prototype = cls()
            prototype.fields  # noqa: B018 (bound once, here)
            cls._prototype = prototype
        return prototype.fields

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)


class _NoSurrogates(ProhibitSurrogateCharactersValidator):
    # DRF's check walks every character of every text in Python (about 2 %
    # of a checkpoint request). The domain's one-call test says whether there
    # is anything to find; only a text that fails is walked, for DRF's own
    # message and code.
    def __call__(self, value: Any) -> None:
        if isinstance(value, str) and limits.encodes(value):
            return
        super().__call__(value)


class StrictCharField(serializers.CharField):
    """DRF turns 42 into "42"; an agent that sends a number meant something else."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators = [_NoSurrogates() if type(v) is ProhibitSurrogateCharactersValidator
                           else v for v in self.validators]

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """Only a JSON integer: not "40", not 40.0, not true."""

    default_error_messages = {"invalid": "A whole number is required (a JSON integer)."}

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """Only true or false: not "yes", not 1."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


def text(max_length: int, **kwargs: Any) -> serializers.CharField:
    return StrictCharField(max_length=max_length, trim_whitespace=False, **kwargs)


def whole(**kwargs: Any) -> serializers.IntegerField:
    return StrictIntegerField(**kwargs)


def ranged(name: str, **kwargs: Any) -> serializers.IntegerField:
    """A policy setting's field, bounded by the domain's RANGES (the one
    definition); the operator's caps are the domain's to check (over_cap)."""
    low, high = RANGES[name]
    return whole(min_value=low, max_value=high, **kwargs)


def text_list(**kwargs: Any) -> serializers.ListField:
    return serializers.ListField(child=text(limits.MAX_ITEM), max_length=limits.MAX_ITEMS,
                                 **kwargs)


class LeaseProofSerializer(StrictSerializer):
    token = text(200, help_text="The raw lease token returned when the lease was acquired.")
    generation = whole(min_value=1)


class FencedSerializer(StrictSerializer):
    # Not required here: a missing lease is the domain's lease_required (400),
    # the same answer on every fenced call.
    lease = LeaseProofSerializer(required=False, allow_null=True,
                                 help_text="The lease you hold: {token, generation}.")


class SessionSerializer(StrictSerializer):
    agent_id = text(limits.MAX_KEY, required=False, allow_blank=True)
    session_key = text(limits.MAX_KEY, required=False, allow_blank=True)
    session_id = text(limits.MAX_KEY, required=False, allow_blank=True)
    model = text(limits.MAX_KEY, required=False, allow_blank=True)
    timezone = text(64, required=False, allow_blank=True,
                    help_text="IANA time zone of the agent, e.g. Europe/Istanbul.")


class PolicySerializer(StrictSerializer):
    lease_seconds = ranged("lease_seconds", required=False,
                          help_text="Lease length (default 600); heartbeat every half of it.")
    cadence_minutes = ranged("cadence_minutes", required=False,
                            help_text="The watchdog's interval in minutes (default 60).")
    max_continuations = ranged("max_continuations", required=False,
                              help_text="Automatic continuations (granted wakes) allowed "
                                        "(default 3).")
    max_wake_retries = ranged("max_wake_retries", required=False,
                             help_text="Consecutive wakes without a checkpoint before the goal "
                                       "blocks (default 5).")
    scheduler = serializers.ChoiceField(
        choices=SCHEDULERS, required=False,
        help_text="internal (default): the server fires the wakes. host: your host does, "
                  "from the schedule prepare_scheduled_continuation answers.")
    dispatch = text(64, required=False,
                    help_text="An operator-configured dispatcher for internal wakes.")
    host_silent_slots = ranged("host_silent_slots", required=False,
                              help_text="Missed host slots before the goal is HOST_SILENT "
                                        "(default 2).")
    ready_timeout_minutes = ranged("ready_timeout_minutes", required=False,
                                  help_text="How long a due wake waits for its agent's pull "
                                            "before READY_UNCLAIMED (default 120).")
    job_deadline_minutes = ranged("job_deadline_minutes", required=False,
                                 help_text="How long a blocking job may go unreported before "
                                           "JOB_SILENT (default 360).")
    progress_minutes = ranged("progress_minutes", required=False,
                             help_text="How long the goal may go without a checkpoint while "
                                       "its lease is held (or beyond one watchdog interval "
                                       "without one) before it is listed NO_PROGRESS "
                                       "(default 60).")


class RunGoalSerializer(StrictSerializer):
    goal_key = text(limits.MAX_KEY, help_text="Your stable name for this piece of work.")
    workspace = text(limits.MAX_WORKSPACE, help_text="Canonical workspace path or repo URL.")
    objective = text(limits.MAX_OBJECTIVE, help_text="A short, secret-free summary.")
    done_criteria = text_list(allow_empty=True, required=False, default=list)
    next_actions = text_list(required=False, default=list,
                             help_text="The plan: recorded as the goal's first checkpoint.")
    session = SessionSerializer(required=False)
    policy = PolicySerializer(required=False)
    timeout_seconds = whole(min_value=1, max_value=30 * 86_400,
                                               required=False, allow_null=True)
    estimated_duration_seconds = whole(min_value=1, max_value=30 * 86_400,
                                                          required=False, allow_null=True)


class ArtifactSerializer(StrictSerializer):
    path = text(limits.MAX_PATH)
    sha256 = serializers.RegexField(r"^[0-9a-f]{64}$", help_text="64 lowercase hex digits.")
    bytes = whole(min_value=0)
    previous_sha256 = serializers.RegexField(
        r"^[0-9a-f]{64}$", required=False,
        help_text="Required to overwrite a path recorded before with another checksum.")


class WakeRequestSerializer(StrictSerializer):
    in_seconds = whole(required=False, min_value=60, max_value=86_400,
                       help_text="Wake me this many seconds from now (at least 60; at most "
                                 "the goal's watchdog interval).")
    at = text(64, required=False, help_text="Or wake me at this instant (ISO 8601 with an "
                                            "offset).")
    reason = serializers.ChoiceField(
        choices=["timeout_recovery", "rate_limit_reset", "dependency_ready",
                 "scheduled_progress"], required=False, default="timeout_recovery",
        help_text="Why: recorded with the wake and told to the resumed agent.")


class ReleaseSerializer(FencedSerializer):
    wake = WakeRequestSerializer(
        required=False, help_text="A one-off wake at this turn boundary: 'wake me in N "
                                  "minutes'. Replaces a pending one; never the watchdog.")


class CheckpointSerializer(FencedSerializer):
    current_step = text(limits.MAX_STEP, help_text="The step you just verified.")
    progress_pct = whole(min_value=0, max_value=100,
                         help_text="0-100; lower than the last checkpoint needs a note.")
    completed = text_list(required=False, default=list,
                          help_text="What this step finished, verified.")
    next_actions = text_list(required=False, default=list,
                             help_text="Exact enough that someone else could continue.")
    artifacts = serializers.ListField(child=ArtifactSerializer(), max_length=limits.MAX_ARTIFACTS,
                                      required=False, default=list)
    errors = text_list(required=False, default=list)
    note = text(limits.MAX_NOTE, required=False, allow_blank=True, default="")
    wake = WakeRequestSerializer(required=False, help_text="With release_lease: a one-off "
                                 "wake at this turn boundary ('wake me in N minutes').")
    release_lease = StrictBooleanField(
        required=False, default=False,
        help_text="Only on the final checkpoint before a turn boundary.")


class EvidenceSerializer(StrictSerializer):
    criterion = text(limits.MAX_ITEM, help_text="The exact text of one of the goal's "
                                                "done_criteria.")
    evidence = text(limits.MAX_NOTE, help_text="What shows it holds: a link, a command and "
                                               "its result.")


class FinishSerializer(FencedSerializer):
    status = serializers.ChoiceField(choices=FINISH_STATUSES)
    summary = text(limits.MAX_NOTE, required=False, allow_blank=True, default="",
                   help_text="What was done. Required (non-empty) with completed.")
    evidence = serializers.ListField(
        child=EvidenceSerializer(), max_length=limits.MAX_ITEMS, required=False, default=list,
        help_text="With completed: one item per done criterion of the goal (none unknown, "
                  "none twice). Not with failed or blocked.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # The done criteria live in the goal; the domain checks the items against them.
        if attrs["status"] == "completed" and not attrs["summary"].strip():
            raise serializers.ValidationError(
                {"summary": "A completed finish needs a summary of what was done."})
        return attrs


class WorkspaceReleaseSerializer(StrictSerializer):
    lease = LeaseProofSerializer(required=False,
                                 help_text="The holder's lease; operators release without one.")
    reason = text(limits.MAX_NOTE, required=False, allow_blank=True, default="")


class WatchdogSerializer(FencedSerializer):
    tzid = text(64, required=False, default="UTC",
                help_text="IANA time zone the host schedule runs in (host backend).")


class ReceiptSerializer(StrictSerializer):
    lease = LeaseProofSerializer(required=False, allow_null=True,
                                 help_text="Required while the goal is active.")
    status = serializers.ChoiceField(choices=["created", "create_failed", "create_uncertain",
                                              "cancelled", "disabled", "user_attested_deleted"])
    host_ref = text(500, required=False, default="",
                    help_text="The host's task id (stored only as a SHA-256 digest).")
    due_at = text(64, required=False, default="", help_text="ISO 8601 with offset.")
    runs_on = serializers.ChoiceField(choices=["cloud", "local", "unverified"], required=False,
                                      default="unverified")
    verified = StrictBooleanField(required=False, default=False,
                                  help_text="The host proved where the task runs.")
    attested_by = text(limits.MAX_KEY, required=False, default="")
    note = text(limits.MAX_NOTE, required=False, allow_blank=True, default="")


class ClaimSerializer(StrictSerializer):
    occurrence_id = text(300, required=False,
                         help_text="The host task run's id; the same id twice is one claim.")
    reason = serializers.ChoiceField(choices=["timeout_recovery", "rate_limit_reset",
                                              "dependency_ready", "scheduled_progress"],
                                     required=False)


class JobSerializer(FencedSerializer):
    kind = text(64, help_text="e.g. ci_run, deploy, review")
    ref = text(500, help_text="The exact run id, e.g. a GitHub Actions run id.")
    link = text(500, required=False, allow_blank=True, default="",
                help_text="Where a human sees the job (its run's page).")
    notify = StrictBooleanField(
        required=False, default=False,
        help_text="Give the job a notify token of its own (shown once): whoever holds it may "
                  "report the job's end at POST /api/v1/jobs/{job_id}/status, and a waiting "
                  "goal is woken at once when its last running job ends.")


class JobNotifySerializer(StrictSerializer):
    status = serializers.ChoiceField(choices=["succeeded", "failed", "cancelled"],
                                     help_text="How the job ended.")
    conclusion = text(limits.MAX_NOTE, required=False, allow_blank=True, default="")
    link = text(500, required=False, allow_blank=True, default="",
                help_text="Where a human sees the job's result.")


class JobStatusSerializer(FencedSerializer):
    status = serializers.ChoiceField(choices=["running", "succeeded", "failed", "cancelled"],
                                     help_text="The job's status as its system reports it.")
    conclusion = text(limits.MAX_NOTE, required=False, allow_blank=True, default="")


class RunSerializer(FencedSerializer):
    outcome = serializers.ChoiceField(choices=["ok", "error"])
    error_text = StrictCharField(required=False, allow_blank=True, default="",
                                 max_length=64 * 1024, trim_whitespace=False,
                                 help_text="The provider's message. Classified, then "
                                           "discarded: it is stored nowhere. An error "
                                           "needs this or retry_after.")
    retry_after = text(64, required=False, allow_blank=True, default="",
                       help_text="The provider's Retry-After header value: delta-seconds "
                                 "(\"120\"), an HTTP-date (\"Wed, 21 Oct 2026 07:28:00 "
                                 "GMT\") or an ISO 8601 timestamp with an offset. A reset "
                                 "more than 7 days away is read as 7 days.")
    session = SessionSerializer(required=False)
    timezone = text(64, required=False, allow_blank=True, default="",
                    help_text="The agent's IANA zone, for resets printed without one.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # Without either there is nothing to classify: the goal would block as
        # UNCLASSIFIED for no reason anyone could read.
        if (attrs["outcome"] == "error" and not attrs["error_text"].strip()
                and not attrs["retry_after"]):
            raise serializers.ValidationError(
                {"error_text": "An error outcome needs the provider's error_text or its "
                               "retry_after (or both)."})
        return attrs

    def validate_retry_after(self, value: str) -> str:
        """Refuse what is no Retry-After value at all; an absurd but well-formed one (the
        year 9999) passes, and the parser clamps it to its horizon."""
        value = value.strip()
        if value and resets.parse_retry_after(value, clock.now()) is None:
            raise serializers.ValidationError(
                "Not a Retry-After value: expected delta-seconds (\"120\"), an HTTP-date "
                "(\"Wed, 21 Oct 2026 07:28:00 GMT\") or an ISO 8601 timestamp with an "
                "offset (\"2026-10-21T07:28:00Z\").")
        return value


class ApprovalSerializer(FencedSerializer):
    gate = text(100, help_text="The gate's name, e.g. deploy: an operator approves or rejects it.")
    summary = text(limits.MAX_NOTE, required=False, allow_blank=True, default="")


class ResolveSerializer(StrictSerializer):
    decision = serializers.ChoiceField(choices=["approve", "reject"])
    note = text(limits.MAX_NOTE, required=False, allow_blank=True, default="")


class OperatorActSerializer(StrictSerializer):
    reason = text(limits.MAX_NOTE, help_text="Why: recorded with the operator's name.")


class EmptySerializer(StrictSerializer):
    """No fields: the call takes none."""


class GoalFilterSerializer(StrictSerializer):
    status = serializers.ChoiceField(choices=STATUSES, required=False)
    reason = serializers.ChoiceField(choices=REASONS, required=False)
    workspace = text(limits.MAX_WORKSPACE, required=False)
    agent = text(limits.MAX_KEY, required=False)
    cursor = text(1000, required=False)
    page_size = serializers.IntegerField(min_value=1, max_value=200, required=False)


class AlertsQuerySerializer(StrictSerializer):
    cursor = text(1000, required=False)
    page_size = serializers.IntegerField(min_value=1, max_value=200, required=False)


class EventsQuerySerializer(StrictSerializer):
    after = serializers.IntegerField(min_value=0, required=False, default=0)
    limit = serializers.IntegerField(min_value=1, max_value=1000, required=False, default=100)


# ---------------------------------------------------------------- responses (docs)


class LeaseSerializer(serializers.Serializer):
    holder = serializers.CharField()
    generation = serializers.IntegerField()
    lease_seconds = serializers.IntegerField(help_text="How long each grant or renewal lasts.")
    acquired_at = serializers.CharField()
    expires_at = serializers.CharField()
    last_heartbeat_at = serializers.CharField()
    via = serializers.ChoiceField(
        choices=["agent", "wake", "pull"], required=False,
        help_text="How it was granted: the agent asked (or took over a stale lease), a push "
                  "wake handed it to a continuation, or the agent pulled a due wake.")
    active = serializers.BooleanField(help_text="The lease is live: not past its expiry.")
    heard_from_holder = serializers.BooleanField(
        help_text="The holder sent a heartbeat, checkpoint or run report since the grant "
                  "(a wake's continuation that stays silent ends INTERRUPTED_UNKNOWN).")


class GrantedLeaseSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="Shown once. Keep it; every fenced call needs it.")
    generation = serializers.IntegerField()
    holder = serializers.CharField()
    expires_at = serializers.CharField()


class ExpectedSerializer(serializers.Serializer):
    evidence = serializers.CharField(allow_null=True, help_text=(
        "heartbeat, job_report, pull, scheduler_fire, host_claim or operator."))
    deadline = serializers.CharField(allow_null=True, help_text="ISO 8601 (UTC).")
    detail = serializers.CharField()


class GoalAlertSerializer(serializers.Serializer):
    reason = serializers.CharField()
    why = serializers.CharField()


class GoalSerializer(serializers.Serializer):
    id = serializers.CharField()
    goal_key = serializers.CharField()
    workspace = serializers.CharField()
    objective = serializers.CharField()
    done_criteria = serializers.ListField(child=serializers.CharField())
    agent = serializers.CharField()
    status = serializers.ChoiceField(choices=STATUSES)
    reason = serializers.CharField(allow_blank=True)
    current_step = serializers.CharField()
    progress_pct = serializers.IntegerField()
    last_completed = serializers.ListField(child=serializers.CharField())
    next_actions = serializers.ListField(child=serializers.CharField())
    artifacts = serializers.ListField(child=serializers.DictField())
    errors = serializers.ListField(child=serializers.CharField())
    retry_count = serializers.IntegerField()
    checkpoints = serializers.IntegerField()
    summary = serializers.CharField(allow_blank=True)
    policy = serializers.DictField()
    session = serializers.DictField()
    timeout_seconds = serializers.IntegerField(allow_null=True)
    estimated_duration_seconds = serializers.IntegerField(allow_null=True)
    workspace_bound = serializers.BooleanField()
    lease = LeaseSerializer(allow_null=True)
    lease_generation = serializers.IntegerField()
    lease_end = serializers.ChoiceField(
        choices=["", "released", "expired", "finished"], allow_blank=True,
        help_text="How the last lease ended ('' while one is held or none ever was).")
    paused_until = serializers.CharField(
        allow_blank=True, help_text="A rate limit's reset plus margin ('' when not paused).")
    rate_limits = serializers.IntegerField(help_text="Consecutive rate limits (the back-off's "
                                                     "exponent); a checkpoint resets it.")
    continuations_used = serializers.IntegerField(
        help_text="Recovery continuations charged, of policy.max_continuations.")
    last_checkpoint_seq = serializers.IntegerField()
    checkpointed_at = serializers.CharField(help_text="When the latest checkpoint was made.")
    progress_since = serializers.CharField(
        help_text="Since when the goal's progress deadline counts: its latest checkpoint, or "
                  "a fresh start without one (a recovery, an approval, a pause's end, a "
                  "blocking job's end). See expected when evidence is checkpoint.")
    watchdog = serializers.DictField(
        allow_null=True, help_text="The one watchdog (backend, interval, status, next due, "
                                   "receipt state, health); null when never prepared.")
    last_wake = serializers.DictField(help_text="The last wake claimed ({} when none).")
    reset_wake = serializers.DictField(
        help_text="The one-off wake at a rate limit's reset ({} when none).")
    requested_wake = serializers.DictField(
        help_text="The one-off wake the agent asked for at a turn boundary ({} when none).")
    jobs = serializers.ListField(child=serializers.DictField(),
                                 help_text="Blocking jobs tracked (CI runs, deploys).")
    pending_approvals = serializers.ListField(child=serializers.DictField())
    finish_requested = serializers.DictField(
        help_text="A finish waiting for its watchdog's cancellation receipt ({} when none).")
    ready = serializers.DictField(help_text="A due wake waiting for this goal's agent to pull "
                                            "it by taking the lease ({} when none).")
    next_wake_at = serializers.CharField(
        allow_null=True, help_text="When the next wake will fire (a watchdog slot or a "
                                   "one-off wake); the scheduler looks every 30 s.")
    liveness = serializers.ChoiceField(
        choices=list(LABELS),
        help_text="What the goal is doing now, judged against its deadline: working (a live "
                  "lease), expired (a lease past its expiry, not yet swept), scheduled, ready "
                  "(a due wake waits for its agent's pull), needs_human and overdue (both "
                  "listed in /alerts), terminal.")
    expected = ExpectedSerializer(
        help_text="The next expected evidence and the deadline by which it must arrive.")
    alert = GoalAlertSerializer(allow_null=True,
                            help_text="Why a human must look (null: nobody must).")
    version = serializers.IntegerField()
    created_at = serializers.CharField()
    updated_at = serializers.CharField()


class GoalPageSerializer(serializers.Serializer):
    """One page of GET /goals: a cursor page, newest first."""

    next = serializers.URLField(allow_null=True, help_text="The next page; null on the last.")
    previous = serializers.URLField(allow_null=True)
    results = GoalSerializer(many=True)


class PreflightSerializer(serializers.Serializer):
    wakes_needed = serializers.BooleanField(allow_null=True)
    wakes_threshold_pct = serializers.IntegerField()
    estimated_duration_seconds = serializers.IntegerField(allow_null=True)
    timeout_seconds = serializers.IntegerField(allow_null=True)
    suggested_chunk_seconds = serializers.IntegerField()
    autosave_reserve_pct = serializers.IntegerField()
    autosave_deadline = serializers.CharField(allow_null=True)


class LeaseAnswerSerializer(serializers.Serializer):
    acquired = serializers.BooleanField()
    lease = GrantedLeaseSerializer(allow_null=True)
    retry_after_seconds = serializers.IntegerField(allow_null=True)
    next_required_action = serializers.CharField(allow_null=True)
    holder = serializers.CharField(required=False)
    expires_at = serializers.CharField(required=False)
    resumed = serializers.DictField(
        allow_null=True, required=False,
        help_text="When this lease pulled a due wake: its occurrence_id, reason and whether "
                  "a recovery continuation was charged.")
    resume_packet = serializers.DictField(
        allow_null=True, required=False,
        help_text="When this lease pulled a due wake: where to pick up, exactly.")
    host_instructions = serializers.DictField(
        required=False,
        help_text="When the goal is HOST_SILENT (its host stopped claiming slots): what to "
                  "check in the host and how to re-create its scheduled task.")


class RunGoalAnswerSerializer(LeaseAnswerSerializer):
    goal = GoalSerializer()
    created = serializers.BooleanField()
    preflight = PreflightSerializer()


class CheckpointContractSerializer(serializers.Serializer):
    task_id = serializers.CharField()
    goal = serializers.CharField()
    status = serializers.CharField()
    current_step = serializers.CharField()
    progress_pct = serializers.IntegerField()
    last_completed = serializers.ListField(child=serializers.CharField())
    next_actions = serializers.ListField(child=serializers.CharField())
    artifacts = serializers.ListField(child=serializers.DictField())
    errors = serializers.ListField(child=serializers.CharField())
    retry_count = serializers.IntegerField()
    updated_at = serializers.CharField()


class CheckpointAnswerSerializer(serializers.Serializer):
    checkpoint = CheckpointContractSerializer()
    version = serializers.IntegerField()
    lease_released = serializers.BooleanField()
    requested_wake = serializers.DictField(allow_null=True, required=False)


class HeartbeatAnswerSerializer(serializers.Serializer):
    generation = serializers.IntegerField()
    expires_at = serializers.CharField()
    preflight = PreflightSerializer()


class ReleaseAnswerSerializer(serializers.Serializer):
    released = serializers.BooleanField()
    status = serializers.CharField()
    requested_wake = serializers.DictField(
        allow_null=True, required=False,
        help_text="The one-off wake asked for (due_at, reason); for a host goal, the one-off "
                  "task its host must create.")


class FinishAnswerSerializer(serializers.Serializer):
    completion_state = serializers.ChoiceField(
        choices=["completed", "failed", "blocked", "pending_native_cleanup"])
    goal = GoalSerializer()


class WorkspaceAnswerSerializer(serializers.Serializer):
    workspace = serializers.CharField()
    workspace_bound = serializers.BooleanField()


class EventSerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    kind = serializers.CharField()
    data = serializers.DictField()
    actor = serializers.CharField()
    recorded_at = serializers.CharField()
    prev_hash = serializers.CharField()
    hash = serializers.CharField()


class EventPageSerializer(serializers.Serializer):
    events = EventSerializer(many=True)
    next_after = serializers.IntegerField(allow_null=True)


class ResumePacketSerializer(serializers.Serializer):
    task_id = serializers.CharField()
    objective = serializers.CharField()
    done_criteria = serializers.ListField(child=serializers.CharField())
    status = serializers.CharField()
    checkpoint = serializers.DictField()
    next_actions = serializers.ListField(child=serializers.CharField())
    artifacts_to_verify = serializers.ListField(child=serializers.DictField())
    jobs_to_inspect = serializers.ListField(
        child=serializers.DictField(), required=False,
        help_text="Blocking jobs still running when the goal resumed: their tracker is gone, "
                  "their status unknown. Inspect each exact ref and report it first.")


class WatchdogAnswerSerializer(serializers.Serializer):
    watchdog = serializers.DictField(allow_null=True)
    next_required_action = serializers.CharField(allow_null=True)
    host_schedule = serializers.DictField(required=False, allow_null=True,
                                          help_text="What the agent's host must create.")
    cleanup = serializers.DictField(required=False, allow_null=True)


class ClaimAnswerSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=[
        "recurring_acquired", "ready_for_pull", "worker_busy_noop", "already_claimed",
        "not_due", "terminal_cleanup_required", "terminal_noop", "receipt_required"])
    occurrence_id = serializers.CharField(
        allow_blank=True, help_text="The occurrence this claim was decided as (a host fire "
                                    "without an id is named after its watchdog slot).")
    report = serializers.DictField()
    retry_after_seconds = serializers.IntegerField(allow_null=True)
    resume_packet = ResumePacketSerializer(allow_null=True)
    lease = GrantedLeaseSerializer(allow_null=True)


class JobAnswerSerializer(serializers.Serializer):
    job = serializers.DictField()
    goal_id = serializers.CharField(required=False)
    notify_token = serializers.CharField(
        required=False, help_text="Shown once: the job's own token for "
                                  "POST /api/v1/jobs/{job_id}/status.")


class RunAnswerSerializer(serializers.Serializer):
    classification = serializers.CharField(allow_blank=True)
    reset_at = serializers.CharField(allow_null=True)
    status = serializers.CharField()
    reason = serializers.CharField(allow_blank=True)
    paused_until = serializers.CharField(allow_null=True)
    next_wake_at = serializers.CharField(allow_null=True)
    continuations = serializers.DictField()


class AlertSerializer(serializers.Serializer):
    id = serializers.CharField()
    goal_key = serializers.CharField()
    workspace = serializers.CharField()
    agent = serializers.CharField()
    status = serializers.CharField()
    reason = serializers.CharField(help_text="A blocked reason, PENDING_NATIVE_CLEANUP, "
                                   "HOST_SILENT, JOB_SILENT, a failure for a human, or OVERDUE "
                                   "(a deadline passed and nothing recorded why).")
    why = serializers.CharField(help_text="What it means and what to do.")
    since = serializers.CharField()
    expected = ExpectedSerializer()


class AlertPageSerializer(serializers.Serializer):
    """One page of GET /alerts: a cursor page, oldest goal first, with the total."""

    count = serializers.IntegerField(help_text="How many goals need a human in all (an SQL "
                                               "count over the same query as the pages).")
    next = serializers.URLField(allow_null=True, help_text="The next page; null on the last.")
    previous = serializers.URLField(allow_null=True)
    results = AlertSerializer(many=True)


class ProblemSerializer(serializers.Serializer):
    type = serializers.CharField()
    title = serializers.CharField()
    status = serializers.IntegerField()
    detail = serializers.CharField()
    code = serializers.CharField()
    errors = serializers.DictField(child=serializers.ListField(child=serializers.CharField()),
                                   required=False)


def validated(serializer_class: type, data: Any) -> dict[str, Any]:
    """``data`` validated by ``serializer_class`` (a ValidationError, answered 400, if not)."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data

"""Request shapes (strict: an unknown field is a 400), and the query
strings of the lists. Choices and limits are the domain's vocabulary."""

from typing import Any

from rest_framework import serializers

from api.serializers.fields import (
    StrictBooleanField,
    StrictCharField,
    StrictSerializer,
    ranged,
    text,
    text_list,
    whole,
)
from ledger.domain import vocabulary
from ledger.services import inputs


class LeaseProofSerializer(StrictSerializer):
    token = text(200, help_text="The raw lease token returned when the lease was acquired.")
    generation = whole(min_value=1)


class FencedSerializer(StrictSerializer):
    # Not required here: a missing lease is the domain's lease_required (400),
    # the same answer on every fenced call.
    lease = LeaseProofSerializer(required=False, allow_null=True,
                                 help_text="The lease you hold: {token, generation}.")


class SessionSerializer(StrictSerializer):
    agent_id = text(vocabulary.MAX_KEY, required=False, allow_blank=True)
    session_key = text(vocabulary.MAX_KEY, required=False, allow_blank=True)
    session_id = text(vocabulary.MAX_KEY, required=False, allow_blank=True)
    model = text(vocabulary.MAX_KEY, required=False, allow_blank=True)
    timezone = text(64, required=False, allow_blank=True,
                    help_text="IANA time zone of the agent, e.g. Europe/Istanbul.")
    binds = serializers.ChoiceField(
        choices=("workspace", "session"), required=False,
        help_text="What the goal holds exclusively among your active goals: its workspace "
                  "(default) or, for a host whose sessions share one workspace, its "
                  "session_key (each session its own goal).")


class QuietHoursSerializer(StrictSerializer):
    start = text(5, help_text="Local time HH:MM the window starts (it may cross midnight).")
    end = text(5, help_text="Local time HH:MM the window ends.")
    timezone = text(vocabulary.MAX_KEY, required=False,
                    help_text="IANA zone of the window (default: the session's).")


class PolicySerializer(StrictSerializer):
    lease_seconds = ranged("lease_seconds", required=False,
                          help_text="Lease length (default 600); heartbeat every half of it.")
    cadence_minutes = ranged("cadence_minutes", required=False,
                            help_text="The watchdog's interval in minutes (default 60).")
    max_continuations = ranged("max_continuations", required=False,
                              help_text="Automatic continuations (granted wakes) allowed "
                                        "(default 3).")
    max_wake_retries = ranged("max_wake_retries", required=False,
                             help_text="Consecutive wakes or turns without progress (a "
                                       "checkpoint that changes what is recorded) before the "
                                       "goal blocks (default 5; at most the server's cap).")
    scheduler = serializers.ChoiceField(
        choices=vocabulary.SCHEDULERS, required=False,
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
    resume = serializers.ChoiceField(
        choices=vocabulary.RESUME_POLICIES, required=False,
        help_text="When a reset's continuation may run: auto (default), ask (a person "
                  "approves it: the approval gate resume), quiet_hours (never inside "
                  "quiet_hours; the wake waits for the window's end).")
    quiet_hours = QuietHoursSerializer(
        required=False, help_text="The window no continuation runs in (resume quiet_hours).")
    host_continues = StrictBooleanField(
        required=False, help_text="The host continues the session by itself at a usage-limit "
                                  "reset (Claude Code's autoContinueAtUsageLimit): the reset's "
                                  "wake waits host_grace_minutes for it first.")
    host_grace_minutes = whole(
        required=False, min_value=vocabulary.HOST_GRACE_RANGE[0],
        max_value=vocabulary.HOST_GRACE_RANGE[1],
        help_text="How long the reset's wake waits for the host's own continue (default 10).")


class RunGoalSerializer(StrictSerializer):
    goal_key = text(vocabulary.MAX_KEY, help_text="Your stable name for this piece of work.")
    workspace = text(vocabulary.MAX_WORKSPACE, help_text="Canonical workspace path or repo URL.")
    objective = text(vocabulary.MAX_OBJECTIVE, help_text="A short, secret-free summary.")
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
    path = text(vocabulary.MAX_PATH)
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
        choices=vocabulary.WAKE_REASONS, required=False, default="timeout_recovery",
        help_text="Why: recorded with the wake and told to the resumed agent.")


class ReleaseSerializer(FencedSerializer):
    wake = WakeRequestSerializer(
        required=False, help_text="A one-off wake at this turn boundary: 'wake me in N "
                                  "minutes'. Replaces a pending one; never the watchdog.")


class CheckpointSerializer(FencedSerializer):
    current_step = text(vocabulary.MAX_STEP, help_text="The step you just verified.")
    progress_pct = whole(min_value=0, max_value=100,
                         help_text="0-100; lower than the last checkpoint needs a note.")
    completed = text_list(required=False, default=list,
                          help_text="What this step finished, verified.")
    next_actions = text_list(required=False, default=list,
                             help_text="Exact enough that someone else could continue.")
    artifacts = serializers.ListField(child=ArtifactSerializer(),
                                      max_length=vocabulary.MAX_ARTIFACTS,
                                      required=False, default=list)
    errors = text_list(required=False, default=list)
    note = text(vocabulary.MAX_NOTE, required=False, allow_blank=True, default="")
    wake = WakeRequestSerializer(required=False, help_text="With release_lease: a one-off "
                                 "wake at this turn boundary ('wake me in N minutes').")
    release_lease = StrictBooleanField(
        required=False, default=False,
        help_text="Only on the final checkpoint before a turn boundary.")


class EvidenceSerializer(StrictSerializer):
    criterion = text(vocabulary.MAX_ITEM, help_text="The exact text of one of the goal's "
                                                "done_criteria.")
    evidence = text(vocabulary.MAX_NOTE, help_text="What shows it holds: a link, a command and "
                                               "its result.")


class FinishSerializer(FencedSerializer):
    status = serializers.ChoiceField(choices=vocabulary.FINISH_STATUSES)
    summary = text(vocabulary.MAX_NOTE, required=False, allow_blank=True, default="",
                   help_text="What was done. Required (non-empty) with completed.")
    evidence = serializers.ListField(
        child=EvidenceSerializer(), max_length=vocabulary.MAX_ITEMS, required=False, default=list,
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
    reason = text(vocabulary.MAX_NOTE, required=False, allow_blank=True, default="")


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
    attested_by = text(vocabulary.MAX_KEY, required=False, default="")
    note = text(vocabulary.MAX_NOTE, required=False, allow_blank=True, default="")


class ClaimSerializer(StrictSerializer):
    occurrence_id = text(300, required=False,
                         help_text="The host task run's id; the same id twice is one claim.")
    reason = serializers.ChoiceField(choices=vocabulary.WAKE_REASONS,
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
    conclusion = text(vocabulary.MAX_NOTE, required=False, allow_blank=True, default="")
    link = text(500, required=False, allow_blank=True, default="",
                help_text="Where a human sees the job's result.")


class JobStatusSerializer(FencedSerializer):
    status = serializers.ChoiceField(choices=["running", "succeeded", "failed", "cancelled"],
                                     help_text="The job's status as its system reports it.")
    conclusion = text(vocabulary.MAX_NOTE, required=False, allow_blank=True, default="")


class SessionActivitySerializer(StrictSerializer):
    session = SessionSerializer(help_text="The session the turn ran in: its session_key must "
                                          "be the goal's.")


class RunSerializer(FencedSerializer):
    outcome = serializers.ChoiceField(
        choices=list(vocabulary.RUN_OUTCOMES),
        help_text="ok or error: how the run ended. note: something the run went on "
                  "through, recorded without pausing anything (give note).")
    note = serializers.ChoiceField(
        choices=list(vocabulary.RUN_NOTES), required=False, default="",
        help_text="With outcome note: subagent_failure or helper_failure (a request that "
                  "was not the turn's own failed; the turn goes on), provider_wait (the "
                  "host waits inside its own retry until retry_after), new_session (a "
                  "continuation found no saved chat and started a new session).")
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
        if (attrs["outcome"] == "note") != bool(attrs["note"]):
            raise serializers.ValidationError(
                {"note": "A note outcome needs note, and only a note outcome takes it."})
        return attrs

    def validate_retry_after(self, value: str) -> str:
        """Refuse what is no Retry-After value at all; an absurd but well-formed one (the
        year 9999) passes, and the parser clamps it to its horizon."""
        value = value.strip()
        if value and not inputs.retry_after_readable(value):
            raise serializers.ValidationError(
                "Not a Retry-After value: expected delta-seconds (\"120\"), an HTTP-date "
                "(\"Wed, 21 Oct 2026 07:28:00 GMT\") or an ISO 8601 timestamp with an "
                "offset (\"2026-10-21T07:28:00Z\").")
        return value


class ApprovalSerializer(FencedSerializer):
    gate = text(100, help_text="The gate's name, e.g. deploy: an operator approves or rejects it.")
    summary = text(vocabulary.MAX_NOTE, required=False, allow_blank=True, default="")


class ResolveSerializer(StrictSerializer):
    decision = serializers.ChoiceField(choices=["approve", "reject"])
    note = text(vocabulary.MAX_NOTE, required=False, allow_blank=True, default="")


class OperatorActSerializer(StrictSerializer):
    reason = text(vocabulary.MAX_NOTE, help_text="Why: recorded with the operator's name.")


class HostContinuedSerializer(StrictSerializer):
    host = text(64, help_text="Who continued the session: claude-code, openclaw, ...")
    trigger = serializers.ChoiceField(choices=vocabulary.CONTINUATION_TRIGGERS,
                                      help_text="The host's hook that saw it.")
    session_key = text(vocabulary.MAX_KEY, required=False, default="",
                       help_text="The session the host continued: the goal's own.")


class EmptySerializer(StrictSerializer):
    """No fields: the call takes none."""


class GoalFilterSerializer(StrictSerializer):
    status = serializers.ChoiceField(choices=vocabulary.STATUSES, required=False)
    reason = serializers.ChoiceField(choices=vocabulary.REASONS, required=False)
    workspace = text(vocabulary.MAX_WORKSPACE, required=False)
    agent = text(vocabulary.MAX_KEY, required=False)
    cursor = text(1000, required=False)
    page_size = serializers.IntegerField(min_value=1, max_value=200, required=False)


class AlertsQuerySerializer(StrictSerializer):
    cursor = text(1000, required=False)
    page_size = serializers.IntegerField(min_value=1, max_value=200, required=False)


class EventsQuerySerializer(StrictSerializer):
    after = serializers.IntegerField(min_value=0, required=False, default=0)
    limit = serializers.IntegerField(min_value=1, max_value=1000, required=False, default=100)

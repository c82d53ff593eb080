"""Response shapes: what the OpenAPI document says each answer holds (the
views answer the use cases' ``as_dict()``; these describe it)."""

from rest_framework import serializers

from ledger.domain import vocabulary

# ---------------------------------------------------------- fields shared by answers
# DRF orders a serializer's fields as declared (a base class's first) and the
# OpenAPI document lists them in that order. A group shared from the start
# of a shape is a base class; one shared from its middle is spliced in where
# it stands with ``vars().update(group())`` in the class body (as
# ``vars()["from"]`` declares a keyword in log_views.py), so the document
# stays the same to the byte.


class GoalNamesSerializer(serializers.Serializer):
    # How a goal is named in every list of goals: its id, goal key and
    # workspace. (A comment: drf-spectacular would publish a docstring as
    # every subclass's description.)
    id = serializers.CharField()
    goal_key = serializers.CharField()
    workspace = serializers.CharField()


def progress_fields() -> dict[str, serializers.Field]:
    """Where the work stands (the checkpoint contract): a goal shows it, and
    so does the contract a checkpoint answers."""
    return {
        "current_step": serializers.CharField(),
        "progress_pct": serializers.IntegerField(),
        "last_completed": serializers.ListField(child=serializers.CharField()),
        "next_actions": serializers.ListField(child=serializers.CharField()),
        "artifacts": serializers.ListField(child=serializers.DictField()),
        "errors": serializers.ListField(child=serializers.CharField()),
        "retry_count": serializers.IntegerField(),
    }


def event_fields(data: type[serializers.Field]) -> dict[str, serializers.Field]:
    """What an event records (a goal's events, a log leaf's record); ``data``
    is the payload's field class, as each document has always declared it
    (made here, in its place: a field's order is when it was made)."""
    return {"seq": serializers.IntegerField(), "kind": serializers.CharField(), "data": data(),
            "actor": serializers.CharField(), "recorded_at": serializers.CharField()}


def chain_fields() -> dict[str, serializers.Field]:
    """An event's links in its goal's hash chain."""
    return {"prev_hash": serializers.CharField(), "hash": serializers.CharField()}


def page_links() -> dict[str, serializers.Field]:
    """A cursor page's links (GET /goals, GET /alerts)."""
    return {"next": serializers.URLField(allow_null=True,
                                         help_text="The next page; null on the last."),
            "previous": serializers.URLField(allow_null=True)}

# ---------------------------------------------------------------------- answers


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


class GoalSerializer(GoalNamesSerializer):
    objective = serializers.CharField()
    done_criteria = serializers.ListField(child=serializers.CharField())
    agent = serializers.CharField()
    status = serializers.ChoiceField(choices=vocabulary.STATUSES)
    reason = serializers.CharField(allow_blank=True)
    vars().update(progress_fields())  # current_step … retry_count
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
    paused_at = serializers.CharField(
        allow_blank=True, help_text="When the latest pause began (or a person last chose to "
                                    "let a LONG_PAUSE wait); read while paused.")
    rate_limits = serializers.IntegerField(help_text="Consecutive rate limits (the back-off's "
                                                     "exponent); a checkpoint resets it.")
    continuations_used = serializers.IntegerField(
        help_text="Recovery continuations charged, of policy.max_continuations.")
    last_checkpoint_seq = serializers.IntegerField()
    checkpointed_at = serializers.CharField(help_text="When the latest checkpoint was made.")
    provider_wait = serializers.DictField(
        allow_null=True,
        help_text="Running, but the host waits inside its own retry for the provider's "
                  "reset: class, until, since (null when it does not, or the reset passed).")
    progress_since = serializers.CharField(
        help_text="Since when the goal's progress deadline counts: its latest checkpoint, or "
                  "a fresh start without one (a recovery, an approval, a pause's end, the "
                  "end of the first job wait since the last progress). See expected when "
                  "evidence is checkpoint.")
    since_progress = serializers.DictField(
        help_text="What the goal went through since its last progress ({} after it): "
                  "leases (grants), empty_turns (leases that ended without progress), "
                  "checkpoints (that changed nothing), jobs (job ends), waited_at (when "
                  "its one credited job wait ended), woken_at (when the first wake since "
                  "then came: its lateness is not held against the goal). Activity, not progress: "
                  "docs/liveness.md.")
    recent_progress = serializers.ListField(
        child=serializers.CharField(),
        help_text="Digests of the latest checkpoints that were progress (at most 8): a "
                  "checkpoint that says one of them again (A, B, A, B…) is a loop, not "
                  "progress. docs/liveness.md.")
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
    continued = serializers.DictField(
        help_text="The last rate-limit reset's one continuation: reset, by (wake, pull, host), "
                  "at, generation ({} when none). Another of that reset stands down.")
    resume_approved = serializers.CharField(
        help_text="The reset a person approved continuing (resume policy ask), or \"\".")
    next_wake_at = serializers.CharField(
        allow_null=True, help_text="When the next wake will fire (a watchdog slot or a "
                                   "one-off wake); the scheduler looks every 30 s.")
    liveness = serializers.ChoiceField(
        choices=list(vocabulary.LABELS),
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

    vars().update(page_links())  # next, previous
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
    vars().update(progress_fields())  # current_step … retry_count
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
    id = serializers.IntegerField(help_text="the event's id (GET /ledger/proof/inclusion?event=)")
    position = serializers.IntegerField(
        allow_null=True, help_text="its leaf index in the verifiable log; null until sealed")
    vars().update(event_fields(data=serializers.DictField))  # seq, kind, data, actor, …
    vars().update(chain_fields())  # prev_hash, hash


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


class HostContinuedAnswerSerializer(LeaseAnswerSerializer):
    outcome = serializers.ChoiceField(
        choices=["host_continued", "stood_down", "not_a_reset"],
        help_text="host_continued: the reset's one continuation, the lease is yours; "
                  "stood_down: the reset was continued already (or a person must approve): "
                  "do no work on the goal in this run; not_a_reset: nothing recorded.")
    notes = serializers.CharField(help_text="One line for the person or the model.")
    reset = serializers.CharField(allow_null=True)
    continued_by = serializers.CharField(allow_null=True)
    breaks_policy = serializers.CharField(allow_null=True)
    acquired = serializers.BooleanField(required=False)
    lease = GrantedLeaseSerializer(allow_null=True, required=False)
    next_required_action = serializers.CharField(allow_null=True, required=False)


class ClaimAnswerSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=[
        "recurring_acquired", "ready_for_pull", "worker_busy_noop", "already_claimed",
        "not_due", "terminal_cleanup_required", "terminal_noop", "receipt_required",
        "stood_down", "approval_required"])
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
    provider_wait = serializers.DictField(
        allow_null=True, help_text="The provider wait the goal shows now (class, until, "
                                   "since), or null.")
    reset_at = serializers.CharField(allow_null=True)
    status = serializers.CharField()
    reason = serializers.CharField(allow_blank=True)
    paused_until = serializers.CharField(allow_null=True)
    next_wake_at = serializers.CharField(allow_null=True)
    continuations = serializers.DictField()


class AlertSerializer(GoalNamesSerializer):
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
    vars().update(page_links())  # next, previous
    results = AlertSerializer(many=True)


class ProblemSerializer(serializers.Serializer):
    type = serializers.CharField()
    title = serializers.CharField()
    status = serializers.IntegerField()
    detail = serializers.CharField()
    code = serializers.CharField()
    errors = serializers.DictField(child=serializers.ListField(child=serializers.CharField()),
                                   required=False)

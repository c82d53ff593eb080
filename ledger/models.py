"""The event store's two tables, ``Event`` (the truth) and ``Goal`` (its projection),
and the verifiable log's.

The app's models module: Django imports it, so it also imports the models that
live with their subpackage (``ledger.access.models``: who may call the API),
which registers them."""

import uuid
from typing import Any, NoReturn

from django.db import models
from django.db.models import Q
from django.db.models.expressions import RawSQL

# Imported to register them with the app (see the docstring); nothing here uses them.
from ledger.access.models import ApiToken, IdempotencyRecord  # noqa: F401
from ledger.domain import ACTIVE_STATUSES, STATUSES, TERMINAL_STATUSES, GoalState
from ledger.domain.kinds import CHECKPOINT_RECORDED, LEASE_RENEWED
from ledger.notify.models import Channel, GoalNotice, Notification  # noqa: F401


class AppendOnlyError(Exception):
    """Raised by the model layer on any attempt to change or remove a stored event."""


class StateField(models.JSONField):
    """The goal's projected state as stored: without the fields at their
    defaults (GoalState.to_stored, ~500 bytes less per command's write), read
    back with them filled in, so every reader of ``goal.state`` (the admin,
    the doctor, a test) sees every field whatever release wrote the row.
    Keys no field has are kept, so replay still reports them. The append
    path reads the stored text itself and never comes through here.

    Deconstructed as a plain JSONField: the column is the same, so the
    migrations need not know this class."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        value = super().from_db_value(value, expression, connection)
        if isinstance(value, dict):
            return {**GoalState().to_dict(), **value}  # a new state: its own lists
        return value

    def deconstruct(self) -> Any:
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs


class Goal(models.Model):
    """One goal's projected state, folded from its events.

    The fields people filter and sort on are real, indexed columns; the rest of
    GoalState lives in ``state``. ``version`` and ``last_hash`` let the next
    command append without re-reading the previous event.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.CharField(max_length=1024)
    goal_key = models.CharField(max_length=200)
    agent = models.CharField(max_length=200, blank=True, default="")
    session_key = models.CharField(max_length=200, blank=True, default="")
    workspace_bound = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=[(s, s) for s in STATUSES])
    reason = models.CharField(max_length=40, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    next_wake_at = models.DateTimeField(null=True, blank=True)
    paused_until = models.DateTimeField(null=True, blank=True)
    # Liveness (ledger.domain.liveness): when the goal's next expected
    # evidence is due (the sweeper's candidates) and why a human must look
    # ("" when nobody must; /alerts). Both derived from the state, like the rest.
    deadline_at = models.DateTimeField(null=True, blank=True)
    attention = models.CharField(max_length=40, blank=True, default="")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    version = models.PositiveIntegerField()
    last_hash = models.CharField(max_length=64)
    state = StateField()

    class Meta:
        constraints = [
            # Every binding is scoped to the goal's agent (Goal.agent, fixed at
            # start): workspace paths are host-local (/srv/app on two hosts is
            # two workspaces) and session keys are the agent's own names, so
            # one agent's goal must never refuse or capture another agent's
            # start. Within one agent the rules are as strict as ever.
            #
            # One goal per workspace, enforced by the database as well as by the store: one
            # active goal per (agent, workspace, goal_key). store.start
            # serializes concurrent starts (an advisory lock on PostgreSQL);
            # this is the safety net that makes a start which got past it fail
            # and retry into the goal the first one created.
            models.UniqueConstraint(
                fields=["agent", "workspace", "goal_key"],
                condition=~Q(status__in=sorted(TERMINAL_STATUSES)),
                name="ledger_goal_one_active_per_key",
            ),
            # The workspace binding (bind-project): one active goal of the agent holds it.
            models.UniqueConstraint(
                fields=["agent", "workspace"],
                condition=Q(workspace_bound=True) & ~Q(status__in=sorted(TERMINAL_STATUSES)),
                name="ledger_goal_one_binding_per_workspace",
            ),
            # One active goal per session key of an agent.
            models.UniqueConstraint(
                fields=["agent", "session_key"],
                condition=~Q(session_key="") & ~Q(status__in=sorted(TERMINAL_STATUSES)),
                name="ledger_goal_one_active_per_session",
            ),
        ]
        indexes = [
            models.Index(fields=["status", "reason"], name="ledger_goal_status_reason"),
            models.Index(fields=["agent", "status"], name="ledger_goal_agent_status"),
            models.Index(fields=["workspace"], name="ledger_goal_workspace"),
            # No index on lease_expires_at, paused_until or goal_key: nothing
            # filters on them (the sweeper asks deadline_at, which covers a
            # lease's stale point; the admin searches goal_key with
            # icontains, which no b-tree serves). Each cost every command:
            # a renewal moved its lease entry (one WAL page per checkpoint on
            # SQLite), and PostgreSQL adds an entry to every index of the
            # goal row on every update, since its indexed updated_at moves.
            models.Index(fields=["next_wake_at"], name="ledger_goal_next_wake"),
            models.Index(fields=["-updated_at"], name="ledger_goal_updated"),
            # The sweeper asks "whose deadline passed?" every minute, and
            # /alerts "who needs a human?": both must not scan every goal.
            models.Index(fields=["deadline_at"], name="ledger_goal_deadline"),
            # ``attention > ''`` (not ``!= ''``): a range SQLite can seek, so
            # the /alerts OR of this and the deadline is two index searches,
            # not a scan of every goal (migration 0011).
            models.Index(fields=["attention"], name="ledger_goal_attention_set",
                         condition=Q(attention__gt="")),
        ]

    def __str__(self) -> str:
        return f"{self.goal_key} @ {self.workspace} ({self.status})"

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_STATUSES


class SchedulerBeat(models.Model):
    """The scheduler's heartbeat (docs/design.md, "Wakes and claims"): the lease sweeper writes
    its row on every pass, so "no pass for minutes" is a fact anyone can read,
    even while no scheduler runs to report it."""

    name = models.CharField(max_length=40, primary_key=True)
    at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} at {self.at:%Y-%m-%d %H:%M:%S}"


class Tally(models.Model):
    """A counter the metrics report (``ledger/eventstore/tallies.py``): how
    many events of a kind, by label, and the wake-lateness histogram's
    buckets, sum and count. Bumped in the transaction that appends the
    events, so a scrape reads a handful of rows instead of the events; not a
    fact (the events are), so not chained, and rebuilt by nothing: counters
    count from the migration that made this table onwards."""

    name = models.CharField(max_length=64)
    labels = models.CharField(max_length=200, blank=True, default="")  # k=v,k=v sorted
    value = models.FloatField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["name", "labels"],
                                               name="ledger_tally_key")]

    def __str__(self) -> str:
        return f"{self.name}{{{self.labels}}} {self.value:g}"


class DoctorPass(models.Model):
    """One whole pass of the doctor (the hourly repair, or `ledger doctor`
    over every goal): when it ran and what it counted. The dashboard shows
    the newest pass's findings instead of checking every goal's wake rows on
    each view (docs/decisions.md). Housekeeping, not a fact: the events record
    the repairs; only the last ``operators.passes.KEEP`` passes are kept."""

    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    source = models.CharField(max_length=40)  # operators.passes.SOURCES
    active = models.IntegerField(default=0)  # active goals the pass went over
    found = models.IntegerField(default=0)  # findings in all (stored: at most STORED)
    schedule_goals = models.IntegerField(default=0)  # goals with a wake row missing or wrong
    repairs = models.IntegerField(default=0)  # events and row deletions the pass made

    def __str__(self) -> str:
        return f"{self.source} at {self.started_at:%Y-%m-%d %H:%M:%S}: {self.found} finding(s)"


class DoctorFinding(models.Model):
    """A finding of a pass (``operators.doctor.Finding``) and what the pass
    did about it. Codes, row names and the doctor's own sentences only: no
    task's error text (``doctor.last_error`` keeps only an exception's type)."""

    run = models.ForeignKey(DoctorPass, on_delete=models.CASCADE, related_name="findings",
                            db_index=False)  # the (run, problem) index leads with it
    goal = models.UUIDField(null=True)  # None: the scheduler's own problem
    problem = models.CharField(max_length=40)
    row = models.CharField(max_length=100, blank=True, default="")
    detail = models.CharField(max_length=300, blank=True, default="")
    outcome = models.CharField(max_length=200, blank=True, default="")  # the repair, if any

    class Meta:
        # The dashboard reads one pass's wake-row findings: (run, problem) seeks them.
        indexes = [models.Index(fields=["run", "problem"], name="ledger_finding_run")]

    def __str__(self) -> str:
        return f"{self.goal or 'scheduler'}: {self.problem}"


# Events nearly every command of a working goal appends; see Event.Meta.indexes.
ROUTINE_KINDS = (CHECKPOINT_RECORDED, LEASE_RENEWED)
_NOT_ROUTINE = ('NOT ("ledger_event"."kind" IN ('
                + ", ".join(f"'{name}'" for name in ROUTINE_KINDS) + "))")


def of_kind(kind: str) -> Q:
    """Events of one kind, spelled so the database can use the rare kinds'
    partial index: SQLite uses one only when the query repeats its condition
    with the same literals (a bound parameter proves nothing to its planner).
    The literals are the constants above, never input."""
    if kind in ROUTINE_KINDS:
        return Q(kind=kind)
    return Q(kind=kind) & Q(RawSQL(_NOT_ROUTINE, (),  # noqa: S611 (constants only)
                                   output_field=models.BooleanField()))


class EventQuerySet(models.QuerySet):
    def update(self, **kwargs: Any) -> NoReturn:
        raise AppendOnlyError("events are append-only; they cannot be updated")

    def delete(self) -> NoReturn:
        raise AppendOnlyError("events are append-only; they cannot be deleted")

    def bulk_update(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise AppendOnlyError("events are append-only; they cannot be updated")


class EventIdField(models.BigAutoField):
    """The events' global position, without SQLite's AUTOINCREMENT.

    AUTOINCREMENT only promises that a deleted row's id is never handed out
    again, and pays for it by rewriting ``sqlite_sequence`` in every insert:
    one more page in the WAL of every append. Events are never deleted (the
    model, the triggers and the admin refuse), so the plain rowid, the
    largest id + 1, already never repeats a committed id; a rolled-back
    insert's id was never visible to anyone. PostgreSQL keeps its identity
    column."""

    def db_type_suffix(self, connection: Any) -> str | None:
        if connection.vendor == "sqlite":
            return None
        return super().db_type_suffix(connection)


class Event(models.Model):
    """One fact about one goal. Never updated, never deleted (three layers:
    this model, database triggers, a read-only admin)."""

    id = EventIdField(primary_key=True)  # global position
    # No index of its own: the (goal, seq) unique index below starts with the
    # goal and serves every "events of a goal" read (and PostgreSQL's foreign
    # key checks) as well; a second one would only be written on every append.
    goal = models.ForeignKey(Goal, on_delete=models.PROTECT, related_name="events",
                             db_index=False)
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=64)
    data = models.JSONField()
    actor = models.CharField(max_length=200)
    recorded_at = models.DateTimeField()
    # NULL, not "", for "no key": a later unique index on it must ignore keyless events.
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    objects = EventQuerySet.as_manager()

    class Meta:
        constraints = [
            # Optimistic concurrency: two writers that both read version N
            # cannot both append seq N+1. Its index also serves "a goal's
            # events in order", the most common read.
            models.UniqueConstraint(fields=["goal", "seq"], name="ledger_event_goal_seq"),
        ]
        # Every index is written on every append, so only those a read needs:
        # (goal, seq) above serves a goal's history, the timeline and replay;
        # ``kind`` serves the auditors' filter over all goals ("every
        # goal.blocked", through ``of_kind``). None on ``actor`` (the admin searches it with
        # icontains, which no b-tree serves) or ``recorded_at`` (ids grow with
        # time, so the date filter's newest-first page stops early).
        # The routine kinds (a checkpoint, a lease renewal: most events of a
        # working goal) are left out of it: their newest-first page is found
        # within a few rows of the end without an index, and indexing them
        # cost one more page written by nearly every commit.
        indexes = [
            models.Index(fields=["kind"], name="ledger_event_rare_kind",
                         condition=~Q(kind__in=ROUTINE_KINDS)),
        ]

    def __str__(self) -> str:
        return f"{self.goal_id} #{self.seq} {self.kind}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AppendOnlyError("events are append-only; a stored event cannot be changed")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise AppendOnlyError("events are append-only; a stored event cannot be deleted")

    @property
    def family(self) -> str:
        return self.kind.partition(".")[0]


# --------------------------------------------------------------------------- the verifiable log
# One Merkle tree over all events (docs/integrity.md, "The verifiable log"),
# written only by the sealing step (ledger/log/sealing.py), never by an append.


class LogLeaf(models.Model):
    """An event's place in the log: its tree index and its leaf hash (level 0).

    ``event_id`` is a plain column, not a foreign key: the log must be able
    to *report* a leaf whose event was deleted behind the database's back,
    and a constraint would only make such a deletion delete or keep the leaf
    (whatever the attacker chose) instead."""

    position = models.BigIntegerField(primary_key=True)
    event_id = models.BigIntegerField(unique=True)
    hash = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"leaf {self.position} (event {self.event_id})"


class LogNode(models.Model):
    """A complete perfect subtree above the leaves: ``key`` is level << 48 | index,
    one integer so that a proof's nodes are one ``IN`` query. Stored once, when
    its last leaf is sealed; a proof of any size is made of these."""

    key = models.BigIntegerField(primary_key=True)
    hash = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"node {self.key >> 48}/{self.key & ((1 << 48) - 1)}"


class TreeHead(models.Model):
    """A signed (size, root, time, horizon): every event with ``id <= horizon``
    is among the first ``size`` leaves. ``timestamp`` is kept as the very text
    signed."""

    size = models.BigIntegerField()
    root = models.CharField(max_length=64)
    timestamp = models.CharField(max_length=32)
    key_id = models.CharField(max_length=40)
    signature = models.CharField(max_length=100)
    horizon = models.BigIntegerField()
    # The same head as a C2SP tlog-checkpoint signed note (origin, size, root;
    # the log's note signature), exactly as signed; "" on heads signed before.
    checkpoint = models.TextField(default="", blank=True)

    class Meta:
        indexes = [models.Index(fields=["size"], name="ledger_treehead_size")]

    def __str__(self) -> str:
        return f"head {self.size} {self.root[:12]}"

    def as_dict(self) -> dict[str, Any]:
        return {"size": self.size, "root": self.root, "timestamp": self.timestamp,
                "key_id": self.key_id, "horizon": self.horizon, "signature": self.signature}


class Cosignature(models.Model):
    """A witness's cosignature/v1 on a head's checkpoint (C2SP tlog-cosignature),
    checked against a configured witness key before it is kept. The newest one
    per witness and head is kept; the API serves them with the checkpoint."""

    head = models.ForeignKey(TreeHead, on_delete=models.CASCADE, related_name="cosignatures")
    witness = models.CharField(max_length=200)  # the witness key's name
    timestamp = models.BigIntegerField()  # the seconds the witness signed
    line = models.TextField()  # the note signature line, as the witness sent it

    class Meta:
        constraints = [models.UniqueConstraint(fields=["head", "witness"],
                                               name="ledger_cosignature_one_per_witness")]

    def __str__(self) -> str:
        return f"cosignature {self.witness} on {self.head_id}"


class SigningKey(models.Model):
    """Every public key that signed a head, kept after rotation so old heads stay
    checkable. A convenience for serving them, not a root of trust: auditors
    pin keys they received out of band (``ledger key``)."""

    key_id = models.CharField(max_length=40, primary_key=True)
    public_key = models.TextField()
    first_used_at = models.DateTimeField()

    def __str__(self) -> str:
        return self.key_id


# The dispatch outbox (docs/design.md, "Wake timing and occurrences"): a
# granted push wake writes its dispatch here in the claim's own transaction,
# next to its events; a qcluster task sends it afterwards. The row holds no
# secret: the continuation's lease token is derived again from the goal and
# the occurrence when the row is sent (``ledger.services.tokens.dispatch_lease``).
class Dispatch(models.Model):
    PENDING, SENDING, SENT, FAILED, UNCERTAIN = "pending", "sending", "sent", "failed", "uncertain"
    STATUSES = [(s, s) for s in (PENDING, SENDING, SENT, FAILED, UNCERTAIN)]

    id = models.BigAutoField(primary_key=True)
    goal_id = models.UUIDField()
    occurrence_id = models.CharField(max_length=300)
    dispatcher = models.CharField(max_length=64)
    generation = models.PositiveIntegerField()  # the lease generation it hands over
    status = models.CharField(max_length=16, choices=STATUSES, default=PENDING)
    detail = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField()
    # When it was marked sending: a row left "sending" past the dispatch
    # timeout belongs to a sender that died mid-call (uncertain, the uncertain-attempt rule).
    sending_at = models.DateTimeField(null=True, blank=True)
    done_at = models.DateTimeField(null=True, blank=True)
    # The id of the web request whose claim wrote the row (ledger/project/requestid.py;
    # "" for a scheduler's wake): the sender logs under it, so a request's
    # lines and its dispatch's lines can be followed by one id.
    request_id = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        # The scheduling app's table, as it always was (its migrations own
        # it): declared here so the use case that records a dispatch
        # writes it without importing the scheduler's shell.
        app_label = "scheduling"
        constraints = [
            # One dispatch per granted occurrence, however often it fired.
            models.UniqueConstraint(fields=["goal_id", "occurrence_id"],
                                    name="scheduling_dispatch_once"),
        ]
        indexes = [
            # The sender and the sweeper look only at unfinished rows.
            models.Index(fields=["status", "created_at"], name="scheduling_dispatch_todo"),
        ]

    def __str__(self) -> str:
        return f"{self.dispatcher} {self.occurrence_id} ({self.status})"

"""The event store: one command, inside the transaction its use case opens.

``record``: lock the goal row → decide → insert the events → fold them into
the stored projection (and the metrics' tallies), inside the transaction
``ledger.services.caller.run`` opens and commits after writing what the
command causes. The store opens no transaction for a use case and calls
nothing above it. A command never half-applies: a DomainError raised by
``decide`` leaves before anything was written.

Appending is the hot path of the whole product, so ``record`` speaks SQL
directly instead of going through the ORM's query building, which costs more
than the database work itself on SQLite. It runs three statements per command
(lock-and-read, insert, update) and never re-reads the previous event: the goal
row carries the chain head (``last_hash``) and the last seq (``version``).
The statements themselves, per driver, are in ``appendsql``.
"""

import json
import logging
import uuid
from contextlib import closing
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS, IntegrityError, connections, transaction
from django.db.models import Q

from ledger.domain import (
    Command,
    Decision,
    DomainError,
    GoalState,
    RunGoal,
    StartGoal,
    clocksteps,
    decision,
    liveness,
)
from ledger.domain.claims import Verdict
from ledger.domain.codec import Payload, encode
from ledger.domain.state import TERMINAL_STATUSES
from ledger.domain.timing import next_wake_at
from ledger.domain.validation import canonical_workspace
from ledger.eventstore import appendsql, clock, tallies
from ledger.eventstore.chain import GENESIS, canonical_text, linked_hash
from ledger.models import Goal

logger = logging.getLogger(__name__)


class GoalNotFound(DomainError):
    code = "not_found"


class VersionConflict(DomainError):
    """Another writer appended the same seq first (only without a row lock)."""

    code = "version_conflict"


@dataclass(frozen=True)
class StoredEvent:
    goal_id: str
    seq: int
    kind: str
    data: dict[str, Any]  # as stored and hashed: ``codec.encode(payload)``
    actor: str
    recorded_at: datetime
    idempotency_key: str | None
    prev_hash: str
    hash: str
    # ``data`` in its canonical JSON text: hashed into the chain, and what
    # SQLite stores (PostgreSQL keeps jsonb in its own spelling anyway).
    data_text: str = field(default="", repr=False, compare=False)
    # The typed event the data was encoded from: what readers look at.
    payload: Payload | None = field(default=None, repr=False, compare=False)

    @classmethod
    def appended(cls, goal_id: str, seq: int, kind: str, data: dict[str, Any], actor: str,
                 recorded_at: datetime, idempotency_key: str | None, prev_hash: str,
                 hash: str, data_text: str, payload: Payload) -> "StoredEvent":
        """The constructor, for the append path: the frozen __init__ sets each
        of the eleven fields through object.__setattr__, twice this."""
        event = _new(cls)
        _set(event, "__dict__", {
            "goal_id": goal_id, "seq": seq, "kind": kind, "data": data, "actor": actor,
            "recorded_at": recorded_at, "idempotency_key": idempotency_key,
            "prev_hash": prev_hash, "hash": hash, "data_text": data_text, "payload": payload})
        return event


_new = object.__new__
_set = object.__setattr__


@dataclass
class Outcome:
    """What a command did: the goal's state after it and the events it appended."""

    state: GoalState
    events: list[StoredEvent] = field(default_factory=list)
    created: bool = False
    before: GoalState = field(default_factory=GoalState)  # the state the command was decided on
    # A claim's verdict (occurrence and outcome), as the domain decided it in
    # this transaction: the claimant is answered from it, never a re-decision.
    claim: Verdict | None = None


def projected_columns(state: GoalState) -> dict[str, Any]:
    """The Goal row's indexed columns, derived from the state (and nothing else,
    so replay can recompute and compare them)."""
    return {
        "workspace": state.workspace,
        "goal_key": state.goal_key,
        "agent": state.agent,
        "session_key": state.session_key,
        "workspace_bound": state.workspace_bound,
        "status": state.status,
        "reason": state.reason,
        "lease_expires_at": state.lease.expires_at if state.lease is not None else None,
        "next_wake_at": next_wake_at(state),
        "paused_until": state.paused_until,
        # Liveness (docs/design.md, "Wakes and claims"): the sweeper's candidates, and /alerts.
        "deadline_at": liveness.deadline_at(state),
        "attention": liveness.attention(state),
        "created_at": state.created_at,
        "updated_at": state.updated_at,
    }


def canonical_id(goal_id: uuid.UUID | str) -> str:
    """A goal id in its one hashed form (lower-case, hyphenated). Every spelling
    ``uuid.UUID`` accepts (upper case, no hyphens, braces, ``urn:uuid:``) names
    the same goal, but only this one may enter the chain: a hash computed over
    another spelling would make ``verify`` report a false break forever."""
    return str(_uuid(goal_id))


def _uuid(goal_id: uuid.UUID | str) -> uuid.UUID:
    if isinstance(goal_id, uuid.UUID):
        return goal_id
    # Parsed once per spelling: uuid.UUID's parser is Python, and the same
    # goals' ids come back command after command (a worker, the sweeper).
    parsed = _UUIDS.get(goal_id) if type(goal_id) is str else None
    if parsed is None:
        try:
            parsed = uuid.UUID(str(goal_id))
        except ValueError:
            raise GoalNotFound(f"no goal {goal_id}") from None
        if type(goal_id) is str:
            if len(_UUIDS) >= _CACHE_SIZE:
                _UUIDS.clear()
            _UUIDS[goal_id] = parsed
    return parsed


_UUIDS: dict[str, uuid.UUID] = {}


# --------------------------------------------------------------------------- commands


def start(command: StartGoal | RunGoal, *, actor: str,
          idempotency_key: str | None = None) -> Outcome:
    """Create the goal for (agent, workspace, goal_key), or return the active one
    (one goal per workspace); with RunGoal, also try to take its lease in the same transaction.

    Every binding fact is read within the starting agent's goals only (the
    goal's ``agent``, fixed at start): a workspace path is host-local and a
    session key is the agent's own name, so another agent's goal neither
    blocks this start nor is handed to it (docs/security.md).
    """
    start_cmd = command.start if isinstance(command, RunGoal) else command
    start_cmd = replace(start_cmd, workspace=canonical_workspace(start_cmd.workspace))
    session_key = start_cmd.session.get("session_key", "")
    for attempt in range(2):
        try:
            with transaction.atomic():
                _serialize_starts(start_cmd.agent, start_cmd.workspace, session_key)
                # One statement, so one snapshot: on PostgreSQL separate reads
                # could see a concurrent start's goal in one and not the other,
                # and report our own goal as "another goal holding the workspace".
                match = Q(workspace=start_cmd.workspace)
                if session_key:
                    match |= Q(session_key=session_key)
                rows = list(
                    Goal.objects.select_for_update().filter(match, agent=start_cmd.agent)
                    .exclude(status__in=TERMINAL_STATUSES)
                    .values_list("id", "workspace", "goal_key", "workspace_bound", "session_key")
                )
                existing = next((r[0] for r in rows if r[1] == start_cmd.workspace
                                 and r[2] == start_cmd.goal_key), None)
                # Facts for the domain's binding rules; it decides what they mean.
                facts = replace(
                    start_cmd,
                    goal_id=str(existing) if existing else start_cmd.goal_id,
                    workspace_bound_by=next((str(r[0]) for r in rows
                                             if r[1] == start_cmd.workspace and r[3]), None),
                    session_bound_by=next((str(r[0]) for r in rows
                                           if session_key and r[4] == session_key), None),
                )
                full = replace(command, start=facts) if isinstance(command, RunGoal) else facts
                if existing is not None:
                    outcome = _execute_locked(connections[DEFAULT_DB_ALIAS], existing, full,
                                              actor, idempotency_key)
                else:
                    outcome = _create(full, actor, idempotency_key)
                if outcome.events:
                    tallies.count(outcome.state.goal_id, outcome)
                return outcome
        except IntegrityError:
            # The safety net: a start that did not take _serialize_starts' lock
            # (an older process during a rolling upgrade) created the goal or
            # took the binding between our read and insert. Retry once: the
            # domain then sees the winner. Expected, so INFO, never WARNING.
            if attempt:
                raise
            logger.info("a concurrent start of %r in %r won the insert; retrying",
                        start_cmd.goal_key, start_cmd.workspace)
    raise AssertionError("unreachable")


# Advisory-lock namespaces (the first of pg_advisory_xact_lock's two int4 keys),
# so the start locks never share a key with each other or with anyone else's.
_LOCK_WORKSPACE = 0x574C0001  # "WL" 1: an (agent, workspace)
_LOCK_SESSION = 0x574C0002  # "WL" 2: an (agent, session key)


def _serialize_starts(agent: str, workspace: str, session_key: str) -> None:
    """Make concurrent starts that could collide on a unique constraint of Goal
    wait for each other, before they read.

    Without this, two starts of one goal on PostgreSQL both read nothing, both
    insert, and the loser's unique violation is retried above, correctly, but
    PostgreSQL logs it as ``ERROR: duplicate key value violates unique
    constraint`` with the whole row: an alarm that is not. Every constraint is
    per (agent, workspace) or per (agent, session key), so those are the
    locks; the second start blocks here until the first commits, and its read
    (a fresh snapshot under READ COMMITTED) then sees the first one's goal.
    Locks are taken in one order (workspace, then session), so two starts
    cannot deadlock on them, and are released at commit or rollback. A hash
    collision only makes two unrelated starts wait for each other, briefly.

    SQLite needs nothing: its BEGIN IMMEDIATE already serializes every writer.
    """
    conn = connections[DEFAULT_DB_ALIAS]
    if conn.vendor != "postgresql":
        return
    # Length-prefixed, so no agent name and path can spell another pair's
    # key (PostgreSQL text cannot hold the NUL a separator would want).
    keys = [(_LOCK_WORKSPACE, f"{len(agent)}:{agent}{workspace}")]
    if session_key:
        keys.append((_LOCK_SESSION, f"{len(agent)}:{agent}{session_key}"))
    with conn.cursor() as cursor:
        for namespace, text in keys:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (namespace, text))


def execute(goal_id: uuid.UUID | str, command: Command, *, actor: str,
            idempotency_key: str | None = None, owner: str | None = None) -> Outcome:
    """``record`` in a transaction of its own (or the caller's, joined whole):
    for a caller outside the use cases (a test, a benchmark, a repair tool).
    Use cases go through ``ledger.services.caller.run``, which owns the
    transaction and writes what the command causes beyond its events."""
    try:
        with transaction.atomic(savepoint=False):
            try:
                outcome = record(goal_id, command, actor=actor,
                                 idempotency_key=idempotency_key, owner=owner)
            except DomainError as error:
                refused = error  # nothing was written: leave the block cleanly
            else:
                return outcome
        raise refused
    except IntegrityError as exc:
        raise conflict(goal_id) from exc


def record(goal_id: uuid.UUID | str, command: Command, *, actor: str,
           idempotency_key: str | None = None, owner: str | None = None) -> Outcome:
    """Run one command against an existing goal inside the caller's open
    transaction: lock its row, decide, append, fold, and move the metrics'
    tallies with the events. A refusal (a DomainError, or an unknown goal) is
    raised before anything is written, so the caller may answer it and go on.

    With ``owner``, a goal of another agent is not found (GoalNotFound), as
    an agent's API sees it: checked on the row the command locks, so no
    separate read is needed and none can see another state than the one the
    command is decided on."""
    outcome = _execute_locked(connections[DEFAULT_DB_ALIAS], _uuid(goal_id), command, actor,
                              idempotency_key, owner)
    if outcome.events:
        tallies.count(outcome.state.goal_id, outcome)
    return outcome


def conflict(goal_id: uuid.UUID | str) -> VersionConflict:
    """What the (goal, seq) constraint's violation means: only reachable if
    something wrote the goal without taking its row lock. Nothing was recorded."""
    return VersionConflict(f"goal {goal_id} changed concurrently; retry")


def load(goal_id: uuid.UUID | str) -> GoalState:
    row = Goal.objects.filter(pk=canonical_id(goal_id)).values_list("state", flat=True).first()
    if row is None:
        raise GoalNotFound(f"no goal {goal_id}")
    return GoalState.from_dict(row)


# --------------------------------------------------------------------------- internals


def _create(command: StartGoal | RunGoal, actor: str, idempotency_key: str | None) -> Outcome:
    now = clock.now()
    decided = decision(GoalState(), command, now)
    goal_id = canonical_id(command.start.goal_id if isinstance(command, RunGoal)
                           else command.goal_id)
    state, stored, head = _fold(goal_id, GoalState(), GENESIS, decided, actor, idempotency_key)
    Goal.objects.create(id=goal_id, version=state.version, last_hash=head,
                        state=state.to_stored(), **projected_columns(state))
    conn = connections[DEFAULT_DB_ALIAS]
    with conn.wrap_database_errors, closing(conn.connection.cursor()) as cursor:
        cursor.execute(*appendsql.insert_sql(conn, appendsql.statements_for(conn),
                                             appendsql.pk_of(conn, goal_id), stored))
    return Outcome(state, stored, created=True)


def _execute_locked(conn: Any, goal_id: uuid.UUID | str, command: Command, actor: str,
                    idempotency_key: str | None, owner: str | None = None) -> Outcome:
    # The caller's transaction is open (BEGIN IMMEDIATE on SQLite; on
    # PostgreSQL it may begin with the locked read below). The statements
    # reach the database through this database's recorder (appendsql).
    recorder = appendsql.recorder_for(conn)
    uid = _uuid(goal_id)  # parsed once: the hashed spelling and the driver's value
    gid, pk = str(uid), appendsql.pk_of(conn, uid)
    with conn.wrap_database_errors:
        row = recorder.read_locked(conn, uid)
        if row is None:
            raise GoalNotFound(f"no goal {goal_id}")
        version, head, raw_state = row
        before, old = _decoded(gid, raw_state)
        if not before.seen_by(owner):
            raise GoalNotFound(f"no goal {goal_id}")
        # Read the clock only once the row is locked, so a goal's events are
        # recorded in the order they were decided; and never earlier than the
        # goal's last event: with several web and scheduler hosts, a clock a
        # little behind another must not record time running backwards.
        decided = decision(before, command, monotonic_now(before))
        if not decided.events:
            return Outcome(before, before=before, claim=decided.claim)
        state, stored, head = _fold(gid, before, head, decided, actor, idempotency_key)
        # Only the columns that changed: fewer values to adapt, and SQLite
        # leaves the indexes of untouched columns alone.
        new = projected_columns(state)
        if old is None:
            old = projected_columns(before)
        changed = tuple(name for name in appendsql.MUTABLE if new[name] != old[name])
        rowcount, stored_text = recorder.write(conn, pk, version, state.to_stored(), head,
                                               stored, changed, new)
        if rowcount != 1:
            raise IntegrityError("goal version moved under its row lock")
        if isinstance(stored_text, str):
            _remember(gid, stored_text, state, new)
    return Outcome(state, stored, before=before, claim=decided.claim)


# The states this process decoded or wrote last, by goal, with the exact JSON
# text they were read from or written as. Decoding the stored state is a
# quarter of an append's own work; the next command on the same goal usually
# runs in the same process (an agent's worker, the sweeper), and finds the
# text it wrote. Keyed on the whole text, not the version: a rolled-back
# command, another process's write or ``replay --fix`` rewriting a projection
# all leave a different text (or the same text, meaning the same state), so
# the cache can never hand back a state the database does not hold. On
# PostgreSQL jsonb comes back in its own spelling, so the write returns that
# spelling (``RETURNING state``) and the text kept is the one the next read
# finds. A written state keeps its projected columns too: the next command
# compares against them instead of deriving them again.
_CACHE_SIZE = 512
_states: dict[str, tuple[str, GoalState, dict[str, Any] | None]] = {}


def _decoded(goal_id: str, raw: Any) -> tuple[GoalState, dict[str, Any] | None]:
    """The stored state, and its projected columns when this process knows them."""
    if not isinstance(raw, str):
        return GoalState.from_dict(raw), None
    cached = _states.get(goal_id)
    if cached is not None and cached[0] == raw:
        return cached[1], cached[2]
    state = GoalState.from_dict(json.loads(raw))
    _remember(goal_id, raw, state, None)
    return state, None


def _remember(goal_id: str, text: str, state: GoalState,
              columns: dict[str, Any] | None) -> None:
    if len(_states) >= _CACHE_SIZE and goal_id not in _states:
        _states.clear()  # simple and bounded; the working set refills it at once
    _states[goal_id] = (text, state, columns)


def monotonic_now(state: GoalState) -> datetime:
    """The clock, but never before the goal's last recorded event by less than
    the skew bound; further behind, the clock was stepped back and the domain
    corrects the goal's stamps (``ledger.domain.clocksteps``)."""
    return clocksteps.recording_time(state, clock.now())


def _fold(goal_id: str, before: GoalState, head: str, decided: Decision, actor: str,
          idempotency_key: str | None) -> tuple[GoalState, list[StoredEvent], str]:
    """The decided events as stored rows (seq, hash chain) and the state they
    fold to, which the decision already holds: every event is one version."""
    stored = []
    for seq, event in enumerate(decided.events, start=before.version + 1):
        # The one place an appended event becomes its stored JSON.
        data = encode(event.payload)
        text = canonical_text(data)
        digest = linked_hash(head, goal_id, seq, event.kind, text, actor, event.at)
        stored.append(StoredEvent.appended(goal_id, seq, event.kind, data, actor, event.at,
                                           idempotency_key, head, digest, text, event.payload))
        head = digest
    return decided.state, stored, head

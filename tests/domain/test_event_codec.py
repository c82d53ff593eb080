"""Events as typed payloads: one class per kind, one codec, upcasters.

The stored JSON of an event is hashed into its goal's chain and the Merkle
log, so the codec must give back exactly the dict the domain stored before
payloads existed, key for key, for every shape the domain writes; and an
older stored shape is upcast on read without its bytes or hash changing.
"""

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.domain import Event, fold, iso, policy
from ledger.domain import kinds as events
from ledger.domain.codec import Payload, decode, encode, kinds, stored_version
from ledger.eventstore import projection
from ledger.eventstore.chain import GENESIS, StoredLink, canonical_text, event_hash, first_break
from ledger.models import Event as EventRow
from ledger.operators import demo
from tests.domain.test_domain_properties import histories, run
from tests.domain.test_domain_wakes import prepared

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


def all_kinds() -> set[str]:
    return {value for name, value in vars(events).items()
            if name.isupper() and isinstance(value, str) and "." in value}


def test_every_kind_has_exactly_one_payload_class():
    registered = kinds()
    assert set(registered) == all_kinds()
    assert len(set(registered.values())) == len(registered)
    for kind, cls in registered.items():
        assert kind == cls.KIND and issubclass(cls, Payload)


def assert_round_trip(event: Event) -> None:
    data = event.data
    decoded = decode(event.kind, data)
    assert decoded == event.payload
    assert decoded.unknown is None, f"{event.kind} writes keys its class does not know"
    # What the domain writes now is its kind's newest shape: never upcast.
    assert stored_version(event.kind, data) == type(event.payload).VERSION
    assert encode(decoded) == data
    assert canonical_text(encode(decoded)) == canonical_text(data)
    # What the store writes is JSON: the same after a trip through it.
    assert encode(decode(event.kind, json.loads(json.dumps(data)))) == data


@settings(max_examples=300)
@given(histories)
def test_every_shape_the_domain_writes_round_trips_byte_for_byte(history):
    _state, emitted, _trace = run(history)
    for event in emitted:
        assert_round_trip(event)


@pytest.mark.django_db
def test_every_stored_event_of_a_seeded_database_round_trips_and_verifies():
    demo.create(base=T0)
    rows = list(EventRow.objects.order_by("goal_id", "seq"))
    assert {row.kind for row in rows} >= {"goal.started", "checkpoint.recorded",
                                          "goal.completed", "lease.taken_over"}
    for row in rows:
        payload = decode(row.kind, row.data)
        assert payload.unknown is None
        assert encode(payload) == row.data
        # The hash over the re-encoded payload is the stored one.
        assert event_hash(row.prev_hash, str(row.goal_id), row.seq, row.kind, encode(payload),
                          row.actor, row.recorded_at) == row.hash
    ids = projection.goal_ids()
    assert all(report.broken is None for report in projection.verify(ids))
    assert list(projection.replay(ids)) == []


# ---------------------------------------------------------------- upcasters


def test_an_old_repair_without_attempt_is_upcast_on_read_and_still_verifies():
    """A repair recorded before repairs were bounded has no ``attempt``
    (the compatibility repaired() once did with data.get("attempt", 1))."""
    old = {"backend": "internal", "status": "created", "schedule_name": "wakeledger-watchdog-x",
           "due_at": "2026-12-02T09:05:00.000000Z", "note": "repaired: the schedule row was "
           "missing", "repair": "missing"}
    assert stored_version(events.RECEIPT_RECORDED, old) == 1
    receipt = decode(events.RECEIPT_RECORDED, old)
    assert isinstance(receipt, events.ReceiptRecorded) and receipt.attempt == 1
    assert stored_version(events.RECEIPT_RECORDED, encode(receipt)) == 2
    wake = decode(events.WAKE_SCHEDULED, {"kind": "reset", "due_at": "2026-12-02T10:00:00.000000Z",
                                          "schedule_name": "wakeledger-reset-x",
                                          "repair": "late"})
    assert isinstance(wake, events.WakeScheduled) and wake.attempt == 1
    # An orphaned row's receipt is no repair of a wake: not upcast, it stays as stored.
    orphan = {"backend": "internal", "status": "cancelled", "schedule_name": "s",
              "note": "n", "repair": "orphaned"}
    assert encode(decode(events.RECEIPT_RECORDED, orphan)) == orphan

    # Stored as it was: the chain is over the stored bytes, never rewritten.
    digest = event_hash(GENESIS, "g", 1, events.RECEIPT_RECORDED, old, "scheduler", T0)
    link = StoredLink(1, events.RECEIPT_RECORDED, old, "scheduler", T0, GENESIS, digest)
    assert first_break("g", [link]) == (None, 1, digest)
    assert "attempt" not in old  # decoding never changed the stored dict


def test_the_upcast_repair_folds_as_one_repair():
    state = prepared("internal")  # a goal with an internal watchdog
    name = state.watchdog.schedule_name
    old = Event.stored(events.RECEIPT_RECORDED, {
        "backend": "internal", "status": "created", "schedule_name": name,
        "due_at": iso(state.watchdog.next_due_at), "note": "repaired", "repair": "missing"}, T0)
    assert fold([old], state).watchdog.repairs == 1


def test_an_old_lease_without_via_is_read_as_the_agents():
    old = {"holder": "agent-1", "generation": 1, "token_sha256": "a" * 64, "lease_seconds": 900,
           "expires_at": "2026-12-02T09:15:00.000000Z"}
    lease = decode(events.LEASE_ACQUIRED, old)
    assert isinstance(lease, events.LeaseAcquired) and lease.via == "agent"
    assert "via" not in old


# The shapes the first commits stored (2026-12-02), as their code wrote them:
# before fenced leases (commit caa6e21's decider) and before claims had kinds
# (commit aeb1e4b's wakes.claim).
FIRST_GOAL = "7d3c1a2e-5b8f-4c7a-9e1d-2f6b8a4c0e13"
FIRST_STARTED = {
    "goal_id": FIRST_GOAL, "workspace": "/srv/repo", "goal_key": "migrate-db",
    "objective": "migrate the database", "done_criteria": ["tests pass"], "agent": "agent-1",
    "checkpoint": {"current_step": "planning", "progress_pct": 0, "next_actions": ["dump"]},
}
FIRST_CHECKPOINT = {"current_step": "dump", "progress_pct": 40, "completed": ["dump"],
                    "next_actions": ["load"], "artifacts": [], "errors": [], "note": ""}
FIRST_ENDS = {events.GOAL_COMPLETED: {"summary": "migrated"},
              events.GOAL_FAILED: {"summary": "gave up", "reason": ""},
              events.GOAL_BLOCKED: {"summary": "stuck", "reason": "AGENT_BLOCKED"}}
FIRST_CLAIM = {"occurrence_id": "host:run-1", "source": "host", "outcome": "recurring_acquired",
               "reason": "scheduled_progress", "notes": "resume from the latest checkpoint",
               "next_due_at": "2026-12-02T10:00:00.000000Z", "retry_count": 1}


def test_a_goal_started_before_policies_reads_as_one_that_named_none():
    started = decode(events.GOAL_STARTED, FIRST_STARTED)
    assert stored_version(events.GOAL_STARTED, FIRST_STARTED) == 1
    assert isinstance(started, events.GoalStarted)
    assert (started.policy, started.session, started.timeout_seconds,
            started.estimated_duration_seconds) == ({}, {}, None, None)
    assert started.objective == "migrate the database" and started.checkpoint == \
        FIRST_STARTED["checkpoint"]
    assert "policy" not in FIRST_STARTED  # decoding never changed the stored dict


@pytest.mark.parametrize("kind", [events.CHECKPOINT_RECORDED, *FIRST_ENDS])
def test_a_checkpoint_or_end_recorded_before_leases_was_under_generation_0(kind):
    old = FIRST_CHECKPOINT if kind == events.CHECKPOINT_RECORDED else FIRST_ENDS[kind]
    assert stored_version(kind, old) == 1
    payload = decode(kind, old)
    assert type(payload) is kinds()[kind] and payload.generation == 0
    assert {key: value for key, value in encode(payload).items() if key != "generation"} == old


def test_a_history_from_before_leases_folds_and_its_stored_bytes_still_verify():
    """A whole early goal: started, checkpointed, completed, each in its
    first shape. Replay folds it; the chain is over the stored bytes."""
    stored = [(events.GOAL_STARTED, FIRST_STARTED),
              (events.CHECKPOINT_RECORDED, FIRST_CHECKPOINT),
              (events.GOAL_COMPLETED, FIRST_ENDS[events.GOAL_COMPLETED])]
    state = fold(Event.stored(kind, data, T0) for kind, data in stored)
    assert (state.goal_id, state.status, state.progress_pct, state.current_step) == \
        (FIRST_GOAL, "done", 100, "dump")
    assert state.policy == {} and state.setting("cadence_minutes") == \
        policy.DEFAULT_POLICY["cadence_minutes"]
    links, previous = [], GENESIS
    for seq, (kind, data) in enumerate(stored, start=1):
        digest = event_hash(previous, FIRST_GOAL, seq, kind, data, "agent-1", T0)
        links.append(StoredLink(seq, kind, data, "agent-1", T0, previous, digest))
        previous = digest
    assert first_break(FIRST_GOAL, links) == (None, 3, previous)


def test_a_claim_recorded_before_wakes_had_kinds_reads_as_recurring():
    assert stored_version(events.WAKE_CLAIMED, FIRST_CLAIM) == 1
    claim = decode(events.WAKE_CLAIMED, FIRST_CLAIM)
    assert isinstance(claim, events.WakeClaimed) and claim.kind == "recurring"
    assert claim.occurrence_id == "host:run-1" and claim.retry_count == 1
    assert "kind" not in FIRST_CLAIM


def test_unknown_keys_are_kept_and_written_back():
    data = {"generation": 3, "from_an_older_release": [1, 2]}
    released = decode(events.LEASE_RELEASED, data)
    assert released.unknown == {"from_an_older_release": [1, 2]}
    assert encode(released) == data


def test_a_missing_required_key_is_said_not_guessed():
    with pytest.raises(ValueError, match="upcaster"):
        decode(events.LEASE_RENEWED, {"generation": 1})


@settings(max_examples=300, deadline=None)
@given(moment=st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31),
                           timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)),
                                                      timezone(timedelta(hours=-11))])))
def test_iso_spells_every_instant_as_strftime_did(moment):
    """The hashed spelling of an instant never changes: ``iso`` formats with
    isoformat now, byte for byte what strftime wrote (years padded as the
    fix for years before 1000 did by hand)."""
    from ledger.domain.events import iso

    utc = moment.astimezone(UTC)
    before = utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if utc.year < 1000:
        before = f"{utc.year:04d}{before[before.index('-'):]}"
    assert iso(moment) == before


def test_a_payloads_copy_is_what_replace_makes():
    """codec.but (the renewal's copy of a fenced call's first event) makes
    what dataclasses.replace makes, for every kind, and refuses a name that
    is not a field as replace does."""
    from dataclasses import fields, replace

    from ledger.domain.codec import but

    for kind, cls in kinds().items():
        values = {f.name: f"v-{f.name}" for f in fields(cls) if f.name != "unknown"}
        payload = cls(**values)
        assert but(payload, lease_expires_at="2026-12-07T10:00:00.000000Z") == \
            replace(payload, lease_expires_at="2026-12-07T10:00:00.000000Z"), kind
        assert encode(but(payload)) == encode(payload), kind
        with pytest.raises(TypeError):
            but(payload, no_such_field=1)

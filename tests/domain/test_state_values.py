"""The goal state's parts are frozen values and its times datetimes, while
the goal row stores exactly what it stored when they were dicts and ISO text."""

import json
import re
from datetime import datetime

import pytest
from hypothesis import given, settings

from ledger.domain import GoalState, fold
from ledger.domain.events import Event
from ledger.domain.parts import PARTS, Lease, OneOffWake, Part, Watchdog
from ledger.domain.state import JSON_DEFAULTS, TIME_FIELDS
from tests.domain.stored_histories import EVERY, FIXTURE, SEEDS, history
from tests.domain.test_domain_properties import histories, run

ROWS = json.loads(FIXTURE.read_text())
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


@pytest.mark.parametrize("row", ROWS, ids=lambda row: f"seed-{row['seed']}")
def test_a_history_folds_to_the_goal_row_it_was_stored_as_before(row):
    """The events of a history (as the event store records them) fold to the
    same stored JSON text, key for key and byte for byte, as the state kept
    as dicts and ISO strings gave (tests/domain/stored_histories.py)."""
    events = [Event.stored(kind, data, datetime.fromisoformat(at))
              for kind, data, at in row["events"]]
    state = fold(events)
    assert json.dumps(state.to_stored()) == row["states"][-1]
    along = [json.dumps(fold(events[:n]).to_stored())  # the states along the way
             for n in range(EVERY, len(events) + 1, EVERY)]
    assert along == row["states"][:-1]


def test_the_fixture_is_what_the_generator_makes_now():
    """The same seeds, decided and folded by the current code, give the
    stored rows captured before: deciding reads the typed values as it read
    the dicts."""
    for row in ROWS[:20]:
        assert row["seed"] in SEEDS
        _, states = history(row["seed"])
        assert [json.dumps(state.to_stored()) for state in states] == row["states"]


@settings(max_examples=200)
@given(histories)
def test_a_stored_state_reads_back_exactly(history):
    """from_dict(to_stored()) gives the folded state back: every part the
    same value, every time the same instant, through JSON as the row keeps it."""
    state, _, _ = run(history)
    stored = json.loads(json.dumps(state.to_stored()))
    assert GoalState.from_dict(stored) == state
    # And the JSON is the shape the row always had: a part a non-empty dict,
    # a time ISO text as events.iso writes it (UTC, microseconds, "Z").
    for name, value in stored.items():
        if name in PARTS:
            assert isinstance(value, dict) and value
            for _, key, time, _ in PARTS[name]._KEYS:
                if time and key in value:
                    assert ISO.fullmatch(value[key]), (name, key, value)
        elif name in TIME_FIELDS:
            assert ISO.fullmatch(value), (name, value)
    for name in PARTS:
        part = getattr(state, name)
        assert part is None or isinstance(part, Part)


def test_a_part_is_none_when_empty_and_its_times_are_aware():
    assert Lease.of({}) is None and Lease.of(None) is None
    older = {"holder": "w", "generation": 2, "token_sha256": "a" * 64,
             "lease_seconds": 600, "acquired_at": "2026-01-01T00:00:00.000000Z",
             "expires_at": "2026-01-01T00:10:00.000000Z",
             "last_heartbeat_at": "2026-01-01T00:00:00.000000Z"}
    lease = Lease.of(older)
    assert lease is not None and lease.expires_at.tzinfo is not None
    assert lease.expires_at - lease.acquired_at == (datetime(2026, 1, 1, 0, 10)
                                                    - datetime(2026, 1, 1))
    # Keys a part lacked in an older row take their defaults; the row's own
    # dict is written back as it was read (as when the parts were dicts),
    # and a changed part in full, in declaration order.
    assert lease.via == "agent" and lease.active is False
    assert lease.stored() == older
    assert list(lease.but(active=True).stored())[-2:] == ["via", "active"]
    reset = OneOffWake.of({"due_at": "2026-01-01T03:00:00.000000Z", "schedule_name": "r"})
    assert reset is not None and reset.stored() == {"due_at": "2026-01-01T03:00:00.000000Z",
                                                    "schedule_name": "r"}


def test_a_row_read_with_its_defaults_filled_in_loads_as_empty_parts():
    """The admin and the doctor read ``goal.state`` with every field filled
    in ({} for a part, "" for a time): it loads as the state."""
    state = GoalState.from_dict({**JSON_DEFAULTS, "goal_id": "g"})
    assert state == GoalState(goal_id="g")
    assert state.lease is None and state.paused_until is None


def test_a_watchdog_starts_its_slots_at_its_anchor_else_its_first_due_time():
    first = datetime.fromisoformat("2026-01-01T01:00:00+00:00")
    anchor = datetime.fromisoformat("2026-01-01T01:30:00+00:00")
    watchdog = Watchdog(backend="host", interval_seconds=3600, tzid="UTC",
                        status="live", first_due_at=first)
    assert watchdog.start == first
    assert Watchdog(backend="host", interval_seconds=3600, tzid="UTC", status="live",
                    first_due_at=first, anchor=anchor).start == anchor

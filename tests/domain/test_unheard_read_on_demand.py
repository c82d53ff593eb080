"""A claim asks its shell for the server's recent silence only when it meets
a lease (``leases.UnheardNeeded``), the one thing the window changes: asked
without it, a claim decides exactly as it would with any window, or asks."""

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.domain import RecordCheckpoint, decide
from ledger.domain.leases import UNREAD, UnheardNeeded
from tests.domain.test_holder_returns import HOUR, T0, apply, fire, pushed_continuation, watched
from tests.factories import proof_of


def released():
    """The agent released its lease cleanly at 09:05: no lease to judge."""
    state = watched()
    return apply(state, RecordCheckpoint("turn 1", 5, release_lease=True, proof=proof_of(state)),
                 T0 + timedelta(minutes=5))


STATES = {"holding": watched, "released": released, "pushed": pushed_continuation}


@settings(max_examples=120, deadline=None)
@given(name=st.sampled_from(sorted(STATES)), at=st.integers(0, 6 * HOUR),
       start=st.integers(-2 * HOUR, 2 * HOUR), length=st.integers(60, 4 * HOUR),
       kind=st.sampled_from(["requested", "recurring", "reset"]))
def test_a_claim_without_the_window_decides_as_with_it_or_asks(name, at, start, length, kind):
    state = STATES[name]()
    now = T0 + timedelta(seconds=at)
    began = now + timedelta(seconds=start)
    window = (began, began + timedelta(seconds=length))
    occurrence = f"internal:g-1@{kind}:{now.isoformat()}"
    with_window = decide(state, fire(occurrence, kind=kind, unheard=window), now)
    try:
        unread = decide(state, fire(occurrence, kind=kind, unheard=UNREAD), now)  # type: ignore[arg-type]
    except UnheardNeeded:
        assert state.lease  # asked only by a claim that meets a lease
        return
    # Not asked: the claim was decided before any rule read the window (or
    # there is no lease), so the window would have changed nothing.
    assert unread == with_window == decide(state, fire(occurrence, kind=kind), now)


def test_a_claim_that_judges_a_lease_asks_for_the_window():
    state = pushed_continuation()
    now = T0 + timedelta(hours=3)  # long past the handed-over lease's stale point
    with pytest.raises(UnheardNeeded):
        decide(state, fire("internal:g-1@r", unheard=UNREAD), now)  # type: ignore[arg-type]

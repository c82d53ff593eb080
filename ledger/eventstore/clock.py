"""The one clock every rule reads. Tests and property tests replace it.

No code calls ``timezone.now()`` directly for a rule: a lease expiry or a
reset time decided against the wall clock cannot be tested at its edges.

``now`` is the clock itself, not a function that asks it: ``use`` puts
another in its place for a block, and ``clock.now()`` (read through the
module, never imported by name) calls whichever is in place. The wall
clock is ``datetime.now(UTC)`` bound once, so reading it runs no Python
of ours.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import partial

Clock = Callable[[], datetime]

now: Clock = partial(datetime.now, UTC)


class FrozenClock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime):
        if start.tzinfo is None:
            raise ValueError("FrozenClock needs an aware datetime")
        self.current = start

    def __call__(self) -> datetime:
        return self.current

    def advance(self, **delta: float) -> datetime:
        self.current += timedelta(**delta)
        return self.current


@contextmanager
def use(source: Clock) -> Iterator[Clock]:
    """``source`` is the clock for the block (``clock.now()`` calls it)."""
    global now
    previous, now = now, source
    try:
        yield source
    finally:
        now = previous

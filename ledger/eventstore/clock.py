"""The one clock every rule reads. Tests and property tests replace it.

No code calls ``timezone.now()`` directly for a rule: a lease expiry or a
reset time decided against the wall clock cannot be tested at its edges.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

_source: Callable[[], datetime] = lambda: datetime.now(UTC)  # noqa: E731


def now() -> datetime:
    return _source()


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
def use(source: Callable[[], datetime]) -> Iterator[Callable[[], datetime]]:
    global _source
    previous, _source = _source, source
    try:
        yield source
    finally:
        _source = previous

"""The one source of the ids and random tokens a use case draws: a new goal's
id, a tracked job's id, an operator wake's occurrence, the random part of a
lease token nobody asked to replay.

Random by default. Like the clock (``ledger/eventstore/clock.py``), it is
injectable, because a deterministic run (the simulation, tests/simulation/)
must draw the same ids for the same seed and still call only use cases:
``use(Seeded(seed))`` swaps the source, ``given(...)`` hands out ids a caller
already chose (the simulation names its goals and jobs itself).
"""

import base64
import random
import secrets
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol


class Source(Protocol):
    def id(self) -> str: ...

    def token(self) -> str: ...


class Random:
    """What production draws: UUID4 ids, 32 random bytes for a token."""

    def id(self) -> str:
        return str(uuid.uuid4())

    def token(self) -> str:
        return secrets.token_urlsafe(32)


class Seeded:
    """The same ids and tokens for the same seed, in the same shapes."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)  # noqa: S311 (deterministic runs only, never production)

    def id(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def token(self) -> str:
        return base64.urlsafe_b64encode(self.rng.randbytes(32)).decode().rstrip("=")


_source: Source = Random()
_given: list[str] = []


def new_id() -> str:
    """A new id: the next one ``given`` holds, else the source's."""
    return _given.pop(0) if _given else _source.id()


def new_token() -> str:
    """The random part of a new token (URL-safe base64 of 32 bytes)."""
    return _source.token()


@contextmanager
def use(source: Source) -> Iterator[Source]:
    global _source
    previous, _source = _source, source
    try:
        yield source
    finally:
        _source = previous


@contextmanager
def given(*ids: str) -> Iterator[None]:
    """The next ids drawn inside the block are these, in order; the ones not
    drawn are dropped when it ends."""
    previous = _given[:]
    _given[:] = list(ids)
    try:
        yield
    finally:
        _given[:] = previous

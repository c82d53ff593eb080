"""What every event kind shares: the event value the decider emits, the one
time format hashed into the chain, and how a kind says what it looks like.

Each kind is declared once, in the domain module of its family, as one frozen
payload class registered with its kind string (``codec.event_kind``): its
stored fields, how it folds into the goal's state (``fold``), its one line
for people (``summary``) and its look (``STYLE``). ``ledger.domain.kinds``
lists them all (docs/design.md, "Event kinds").

A stored kind never changes meaning and its data never changes shape without
an upcaster (``codec.upcaster``): old events are replayed forever.
How a payload is stored (which keys, which ones only when set) is said by its
fields and applied in one place, ``ledger.domain.codec``.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ledger.domain.codec import Payload, decode, encode

# Nested values of a payload (a policy, a checkpoint, an artifact, evidence
# items) stay the JSON the domain validated: stored as they are, compared
# byte for byte.
Json = dict[str, Any]
# What an event's ``fold`` returns: the state's fields it changes (the
# decider applies them in one copy of the frozen state).
Changes = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Style:
    """How a kind is shown, by name only: the look of its family (an icon and
    a colour), a named colour that says more than the family's (how a goal
    ended is what people look for), and the marker it is drawn as on the
    admin's progress chart. The operators' tables turn these names into
    terminal colours and SVG (``ledger.operators.colours``, ``timeline``)."""

    look: str
    colour: str = ""
    marker: str = ""


@dataclass(frozen=True, slots=True)
class Event:
    """What the decider emits: a typed payload (its class says the kind) and
    when it happened."""

    payload: Payload
    at: datetime

    @property
    def kind(self) -> str:
        return self.payload.KIND

    @property
    def data(self) -> dict[str, Any]:
        """The payload as stored and hashed (``codec.encode``)."""
        return encode(self.payload)

    @property
    def family(self) -> str:
        return self.kind.partition(".")[0]

    @classmethod
    def stored(cls, kind: str, data: Mapping[str, Any], at: datetime) -> "Event":
        """An event read back from its stored kind and data (``codec.decode``)."""
        return cls(decode(kind, data), at)


def iso(moment: datetime) -> str:
    """UTC, microseconds, always the same shape: it is hashed into the chain."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("the ledger only records aware datetimes")
    # The text strftime("%Y-%m-%dT%H:%M:%S.%fZ") wrote (the year padded to
    # four digits, which glibc's %Y did not do before 1000), by %-formatting:
    # strftime and isoformat both go through C's printf machinery, several
    # times the cost (bench/profile_append.py; tests/domain/test_event_codec.py).
    u = moment.astimezone(UTC)
    return _iso_format % (u.year, u.month, u.day, u.hour, u.minute, u.second, u.microsecond)


_iso_format = "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ"



"""The goal state's parts as frozen values (docs/design.md, "Goal state").

Each part of ``GoalState`` that is a record of its own — the lease, the
watchdog, a due wake waiting for its pull, a pending one-off wake, the last
wake's claim, a reset's continuation, a liveness alert, a provider wait — is
a frozen value with named fields, its times aware datetimes. An empty part is
``None`` (never an empty value). What the goal row stores does not change:
``stored()`` writes each part as the dict the projection always stored (the
same keys, in the same order, the times as ``events.iso`` writes them, an
optional key left out when it is unset) and ``of()`` reads it back.
"""

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from datetime import datetime
from typing import Any, ClassVar, Self

from ledger.domain.events import iso

_parse = datetime.fromisoformat


def iso_text(moment: datetime | None) -> str:
    """A time as the ledger writes it (``events.iso``), or "" for none: what a
    message or an answer shows of an optional time."""
    return iso(moment) if moment is not None else ""


_new = object.__new__
_set = object.__setattr__  # what a frozen dataclass's own __init__ uses
# Where a part keeps its stored dict once it has one (in its instance dict,
# beside the fields): read from a row, or written once. A part never
# changes, so neither does its dict; ``but`` makes a new part without it.
_STORED = "_stored"


class Part:
    """What every part shares: read from and written to its stored dict.

    Frozen dataclasses without ``__slots__``: a part is made from a stored
    row (every read of a goal) or copied with a change (``but``, once per
    event that changes it) by setting its instance dict in one call, where
    the frozen ``__init__`` sets each field with a call of its own."""

    # Filled in by ``_stored_as`` for each part class: (field, stored key,
    # is a time, left out when unset) in declaration order; the same by
    # stored key; and the defaults of the fields that have one.
    _KEYS: ClassVar[tuple[tuple[str, str, bool, bool], ...]] = ()
    _BY_KEY: ClassVar[dict[str, tuple[str, bool]]] = {}
    _DEFAULTS: ClassVar[dict[str, Any]] = {}
    _COUNT: ClassVar[int] = 0

    @classmethod
    def of(cls, data: Mapping[str, Any] | None) -> Self | None:
        """The part a stored dict holds (None for an empty or missing one).
        A key the dict lacks takes the field's default (an older projection);
        one no field has is ignored (replay rewrites the row)."""
        if not data:
            return None
        values = {**cls._DEFAULTS}
        by_key = cls._BY_KEY
        for key, value in data.items():
            if value is None or key not in by_key:
                continue  # the field's default; a key of no field
            name, time = by_key[key]
            if time:
                if not value:
                    continue
                value = _parse(value)
            values[name] = value
        if len(values) != cls._COUNT:
            missing = [name for name, *_ in cls._KEYS if name not in values]
            raise ValueError(f"a stored {cls.__name__} lacks {', '.join(missing)}")
        # Its stored dict is the one it was read from (written back as it was
        # read, as the projection kept its parts when they were dicts).
        values[_STORED] = data
        part = _new(cls)
        _set(part, "__dict__", values)
        return part

    def stored(self, texts: dict[datetime, str] | None = None) -> dict[str, Any]:
        """The dict the goal row keeps for this part (JSON: times as ISO
        text); the same dict every time (never change it). ``texts``: the
        instants the caller formatted already (``GoalState.to_stored``)."""
        fields_ = self.__dict__
        if _STORED in fields_:
            return fields_[_STORED]
        if texts is None:
            texts = {}
        out: dict[str, Any] = {}
        for name, key, time, optional in self._KEYS:
            value = fields_[name]
            if value is None:
                if optional:
                    continue
            elif time:
                if value in texts:
                    value = texts[value]
                else:
                    value = texts[value] = iso(value)
            out[key] = value
        fields_[_STORED] = out
        return out

    def but(self, **changes: Any) -> Self:
        """A copy with ``changes`` (its fields' names), as ``replace`` makes
        it without a call per field."""
        values = {**self.__dict__, **changes}
        values.pop(_STORED, None)
        part = _new(type(self))
        _set(part, "__dict__", values)
        return part


def _stored_as(*, keys: Mapping[str, str] | None = None,
               optional: frozenset[str] = frozenset()) -> Any:
    """Record how a part class is stored: its fields in declaration order (the
    stored key order), a datetime field as a time, the optional ones left out
    when unset; ``keys`` renames a field whose stored key is not a name."""

    def wrap(cls: type[Part]) -> type[Part]:
        hints = cls.__annotations__
        cls._KEYS = tuple(
            (f.name, (keys or {}).get(f.name, f.name), "datetime" in str(hints[f.name]),
             f.name in optional)
            for f in fields(cls))  # type: ignore[arg-type]
        cls._BY_KEY = {key: (name, time) for name, key, time, _ in cls._KEYS}
        cls._DEFAULTS = {f.name: f.default for f in fields(cls)  # type: ignore[arg-type]
                         if f.default is not MISSING}
        cls._COUNT = len(cls._KEYS)
        return cls

    return wrap


@_stored_as()
@dataclass(frozen=True)
class Lease(Part):
    """The live lease: who holds it, its generation (fencing), the digest of
    its token (never the raw token), and its times. ``active``: its holder
    has shown a sign of life since the grant (the uncertain-attempt rule),
    not "live now" (``leases.lease_live``)."""

    holder: str
    generation: int
    token_sha256: str
    lease_seconds: int
    acquired_at: datetime
    expires_at: datetime
    last_heartbeat_at: datetime
    # agent | wake (an automatic continuation) | pull | host (ledger.domain.continuations)
    via: str = "agent"
    active: bool = False


@_stored_as(optional=frozenset({
    "schedule_name", "last_receipt", "last_receipt_at", "host_ref_sha256", "runs_on",
    "repaired_at", "repairs", "early_fire"}))
@dataclass(frozen=True)
class Watchdog(Part):
    """The goal's one recurring wake (ledger.domain.watchdogs). Slots are
    ``anchor + k x interval`` (ledger.domain.timing)."""

    backend: str  # internal | host
    interval_seconds: int
    tzid: str
    status: str  # requested | live | uncertain | create_failed | failed | disabled | …
    attempt: int = 1  # the create attempt (2: the one retry)
    first_due_at: datetime | None = None
    anchor: datetime | None = None
    next_due_at: datetime | None = None
    retry_allowed: bool = False
    schedule_name: str | None = None  # internal: the django-q2 schedule's name
    last_receipt: str | None = None
    last_receipt_at: datetime | None = None
    host_ref_sha256: str | None = None  # host, created: the digest of the host's task id
    runs_on: str | None = None  # host, created: cloud | local | unverified
    # A repair recreated its row: a fresh lateness window, and repairs since it last fired.
    repaired_at: datetime | None = None
    repairs: int | None = None
    early_fire: datetime | None = None  # a host's early fire, compared with the next

    @property
    def start(self) -> datetime | None:
        """Where its slots are counted from: the anchor, else its first due time."""
        return self.anchor or self.first_due_at


@_stored_as(optional=frozenset({"reason", "repaired_at", "repairs"}))
@dataclass(frozen=True)
class OneOffWake(Part):
    """A pending one-off wake: at a rate-limit reset (``reset_wake``, no
    reason) or asked for by the agent (``requested_wake``; a host goal's has
    no schedule row, its ``schedule_name`` is "")."""

    due_at: datetime
    reason: str | None = None  # requested only: why
    schedule_name: str | None = ""
    repaired_at: datetime | None = None
    repairs: int | None = None


@_stored_as(optional=frozenset({"since", "reset"}))
@dataclass(frozen=True)
class Ready(Part):
    """A due wake waiting for its agent to pull it (dispatcher "none")."""

    occurrence_id: str
    reason: str
    at: datetime  # when the latest slot found it ready
    # When it first became ready (its READY_UNCLAIMED deadline); kept across
    # the later slots that find it still unpulled.
    since: datetime | None = None
    charge: bool = False  # a recovery continuation (the continuation budget)
    reset: datetime | None = None  # the rate-limit reset whose continuation the pull is

    @property
    def first_at(self) -> datetime:
        return self.since or self.at


@_stored_as()
@dataclass(frozen=True)
class LastWake(Part):
    """The last wake's claim: its occurrence, outcome, reason and time."""

    occurrence_id: str
    outcome: str
    reason: str
    at: datetime


@_stored_as()
@dataclass(frozen=True)
class Continued(Part):
    """The last continuation of a rate-limit reset, whoever made it: a second
    one of the same reset stands down against it."""

    reset: datetime
    by: str  # the lease's via: wake | pull | agent | host
    at: datetime
    generation: int  # of the lease it continued under


@_stored_as(optional=frozenset({"missed_since", "last_progress", "schedule_name",
                                "last_error", "since_progress", "paused_until"}))
@dataclass(frozen=True)
class LivenessAlert(Part):
    """A missed deadline (or a fact) that needs a human to look without
    blocking the goal; cleared by the evidence it waited for. The facts after
    ``detail`` are those its reason has (unset ones are not stored)."""

    reason: str
    at: datetime
    detail: str = ""
    missed_since: datetime | None = None  # HOST_SILENT, with a live watchdog
    last_progress: datetime | None = None  # NO_PROGRESS
    schedule_name: str | None = None  # WAKE_NOT_FIRING
    last_error: str | None = None
    since_progress: dict[str, int] | None = None  # NO_PROGRESS: what happened since
    paused_until: datetime | None = None  # LONG_PAUSE: the reset it waits for


@_stored_as(keys={"error_class": "class"})
@dataclass(frozen=True)
class ProviderWait(Part):
    """The running agent's host waits inside its own retry for a provider's
    reset, under the lease of ``generation``."""

    error_class: str
    until: datetime
    since: datetime
    generation: int


def active(lease: Lease | None) -> Lease | None:
    """The lease with its holder heard from since the grant (a sign of life for
    the uncertain-attempt rule); the same value when it was already."""
    if lease is None or lease.active:
        return lease
    return lease.but(active=True)


# The GoalState fields that hold a part, and the part's class.
PARTS: dict[str, type[Part]] = {
    "lease": Lease,
    "watchdog": Watchdog,
    "ready": Ready,
    "unclaimed": Ready,
    "reset_wake": OneOffWake,
    "requested_wake": OneOffWake,
    "last_wake": LastWake,
    "continued": Continued,
    "liveness_alert": LivenessAlert,
    "provider_wait": ProviderWait,
}

"""Event data as typed payloads, and the one place they become stored JSON and back.

Every event kind has one frozen dataclass (in its family's domain module,
listed by ``ledger.domain.kinds``), registered here with its kind
(``event_kind``). ``encode`` turns a payload
into the dict that is stored and hashed; ``decode`` turns a stored dict back
into its payload, upcasting an older stored shape first. Nothing else turns
event data into JSON or back: the store encodes at append, and replay, the
readers and the folds see payloads.

The stored bytes never change. The JSON of an event is hashed into its
goal's chain and the Merkle log, so ``encode(decode(d)) == d`` must hold for
every shape the domain writes, key for key:

- a field's key is its attribute's name unless the field says otherwise
  (``stored_as``: ``run.reported`` stores ``class``, a Python keyword);
- an ``optional()`` field is omitted from the JSON while it is None, the way
  the domain left such a key out before payloads existed; every other field is
  always written, None included (stored as ``null``);
- values are kept as they are (no coercion): a list stays the same list, an
  int an int, so the canonical JSON is the same text;
- keys a class does not know (an older release's, say) are kept in
  ``unknown`` and written back as they were, so reading never loses or
  refuses part of the history; tests check the domain writes none.

Upcasters (``upcaster``) change an older stored shape into the current one
*on read only*: the stored row and its hash are never rewritten, and
``verify`` hashes the stored JSON, never a re-encoded payload. A stored
event carries no version number (adding one would change every new event's
bytes), so a kind with more than one shape registers how to tell them apart
(``versioned_by``). Every kind is at its first shape (version 1): the shapes
development builds wrote before 0.1.0 are not read (docs/decisions.md); the
first shape change of a released kind registers its upcaster beside the class.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:  # annotations only: the state and the style know nothing of the codec
    from ledger.domain.events import Style
    from ledger.domain.state import GoalState

_KEY = "wakeledger.key"  # the stored key, when it is not the attribute's name
_OMIT = "wakeledger.omit"  # absent from the stored JSON while None


def optional(*, key: str | None = None) -> Any:
    """A key the stored JSON carries only when set (None: absent)."""
    return field(default=None, metadata={_OMIT: True, **({_KEY: key} if key else {})})


def stored_as(key: str) -> Any:
    """A required field stored under another key than its attribute's name."""
    return field(metadata={_KEY: key})


@dataclass(frozen=True, slots=True, kw_only=True)
class Payload:
    """The data of one event. Subclasses are frozen, slotted, keyword-only
    dataclasses registered with ``event_kind``; each kind's class is the one
    place it is declared: its fields, ``fold``, ``line`` and ``STYLE``."""

    KIND: ClassVar[str] = ""
    # The shape the domain writes now; an older stored one is upcast on read.
    VERSION: ClassVar[int] = 1
    # How the kind looks in the terminal and the admin (names only).
    STYLE: ClassVar["Style"]
    # The kind ends or hands on the lease a fenced call presented: the call
    # renews nothing (``leases.renewing``).
    CHANGES_LEASE: ClassVar[bool] = False

    # Every fenced call renews its lease on its first event (leases.renewing),
    # whatever its kind: the expiry it renewed to.
    lease_expires_at: str | None = optional()
    # Stored keys this class does not know, kept so that they are written back.
    unknown: Mapping[str, Any] | None = field(default=None, repr=False)


    def fold(self, state: "GoalState", at: datetime) -> dict[str, Any]:
        """The fields of ``state`` this event changes, recorded at ``at``.
        Every kind has its own; a payload without one is never skipped."""
        raise ValueError(f"no fold for event kind {self.KIND!r}")

    def line(self) -> str:
        """The event's one-line summary, plain text (a field an older or
        damaged event lacks reads "?"). Not ``summary``: several kinds store
        a field of that name (a goal's ending, a gate, a stop)."""
        raise NotImplementedError(f"no summary line for event kind {self.KIND!r}")


P = TypeVar("P", bound=Payload)


@dataclass(frozen=True, slots=True)
class _Spec:
    cls: type[Payload]
    out: tuple[tuple[str, str, bool], ...]  # (attribute, stored key, omitted while None)
    attribute_of: Mapping[str, str]  # stored key -> attribute
    # The stored keys, when each is its attribute's own name (no key renamed):
    # data with only these keys is the class's keyword arguments as it is.
    plain_keys: frozenset[str] | None


_BY_KIND: dict[str, _Spec] = {}
_BY_CLASS: dict[type[Payload], _Spec] = {}


def event_kind(kind: str, *, version: int = 1) -> Callable[[type[P]], type[P]]:
    """Register a payload class as the one class of ``kind``."""

    def register(cls: type[P]) -> type[P]:
        if kind in _BY_KIND:
            raise ValueError(f"event kind {kind!r} is registered twice")
        cls.KIND, cls.VERSION = kind, version
        own = [f for f in fields(cls) if f.name not in _BASE_FIELDS]
        base = [f for f in fields(cls) if f.name in _BASE_FIELDS and f.name != "unknown"]
        # The class's own keys first, then the renewal that rides on any kind
        # (leases.renewing appended it last): the order a dict had before
        # payloads existed. The stored JSON sorts its keys anyway.
        out = tuple((f.name, f.metadata.get(_KEY, f.name), bool(f.metadata.get(_OMIT)))
                    for f in (*own, *base))
        renamed = any(name != key for name, key, _omit in out)
        spec = _Spec(cls, out, {key: name for name, key, _omit in out},
                     None if renamed else frozenset(key for _name, key, _omit in out))
        _BY_KIND[kind] = spec
        _BY_CLASS[cls] = spec
        return cls

    return register


_BASE_FIELDS = frozenset(f.name for f in fields(Payload))


def but(payload: P, **changes: Any) -> P:
    """``dataclasses.replace`` for a payload, at half its cost: the slots
    copied as they are (a payload has no ``__post_init__``; its values were
    checked when it was made), then ``changes`` (field names only)."""
    cls = type(payload)
    names = _SLOTS.get(cls)
    if names is None:
        names = _SLOTS[cls] = tuple(f.name for f in fields(cls))
    for name in changes:
        if name not in names:
            raise TypeError(f"{cls.__name__} has no field {name}")
    copy = _new(cls)
    for name in names:
        _set(copy, name, changes[name] if name in changes else getattr(payload, name))
    return copy


_SLOTS: dict[type[Payload], tuple[str, ...]] = {}
_new = object.__new__
_set = object.__setattr__  # what the frozen dataclass's own __init__ uses


def kinds() -> dict[str, type[Payload]]:
    """Every registered kind and its class."""
    return {kind: spec.cls for kind, spec in _BY_KIND.items()}


class Unreadable(ValueError):
    """A stored event this release cannot read: never skipped, always said."""


class UnknownKind(Unreadable):
    """A stored kind no class is registered for."""


def encode(payload: Payload) -> dict[str, Any]:
    """The payload as the JSON dict that is stored and hashed."""
    spec = _BY_CLASS[type(payload)]
    data: dict[str, Any] = {}
    for name, key, omit in spec.out:
        value = getattr(payload, name)
        if value is None and omit:
            continue
        data[key] = value
    if payload.unknown:
        data.update(payload.unknown)
    return data


def decode(kind: str, data: Mapping[str, Any]) -> Payload:
    """A stored event's data as its payload (upcast to the current shape first)."""
    spec = _BY_KIND.get(kind)
    if spec is None:
        raise UnknownKind(f"unknown event kind {kind!r}: no payload class, no fold")
    if (kind, 1) in _FIRST_VERSIONS:
        data = _upcast(spec, data)
    plain = spec.plain_keys
    if plain is not None and data.keys() <= plain:
        try:
            return spec.cls(**data)
        except TypeError:
            pass  # a required key missing: said below
    attribute_of = spec.attribute_of
    values: dict[str, Any] = {}
    unknown: dict[str, Any] = {}
    for key, value in data.items():
        name = attribute_of.get(key)
        if name is None or name == "unknown":
            unknown[key] = value
        else:
            values[name] = value
    try:
        return spec.cls(**values, unknown=unknown) if unknown else spec.cls(**values)
    except TypeError as error:  # a required key missing: an older shape
        raise Unreadable(f"stored {kind} data has not the shape of {spec.cls.__name__} "
                         f"({error}); an older shape needs an upcaster") from None


def decode_or_none(kind: str, data: Any, *, partial: bool = False) -> Payload | None:
    """``decode`` for readers that show whatever is stored (and fall back to
    the raw keys): None for an unknown kind or a shape that does not decode.
    With ``partial``, a required key the data lacks (a damaged row, a shape no
    upcaster knows) is read as None, for a display that says "?" instead."""
    if not isinstance(data, Mapping):
        return None
    try:
        return decode(kind, data)
    except (ValueError, TypeError, KeyError):
        if not partial or kind not in _BY_KIND:
            return None
    spec = _BY_KIND[kind]
    missing = {key: None for _name, key, _omit in spec.out if key not in data}
    try:
        return decode(kind, {**missing, **data})
    except (ValueError, TypeError, KeyError):
        return None


# ---------------------------------------------------------------- upcasters

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
_UPCASTERS: dict[tuple[str, int], Upcaster] = {}
_VERSION_OF: dict[str, Callable[[Mapping[str, Any]], int]] = {}
# Kinds with any upcaster, looked up once per decoded event (the hot path).
_FIRST_VERSIONS: set[tuple[str, int]] = set()


def versioned_by(kind: str) -> Callable[[Callable[[Mapping[str, Any]], int]],
                                        Callable[[Mapping[str, Any]], int]]:
    """Register how to tell a stored ``kind``'s shape version from its data."""

    def register(fn: Callable[[Mapping[str, Any]], int]) -> Callable[[Mapping[str, Any]], int]:
        _VERSION_OF[kind] = fn
        return fn

    return register


def upcaster(kind: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    """Register the function that turns ``kind``'s stored shape ``from_version``
    into ``from_version + 1`` (a new dict; the stored one is never changed)."""

    def register(fn: Upcaster) -> Upcaster:
        spec = _BY_KIND.get(kind)
        if spec is None or not 1 <= from_version < spec.cls.VERSION:
            raise ValueError(f"no shape {from_version + 1} of {kind!r} to upcast to")
        if (kind, from_version) in _UPCASTERS:
            raise ValueError(f"{kind!r} from version {from_version} is upcast twice")
        _UPCASTERS[kind, from_version] = fn
        _FIRST_VERSIONS.add((kind, 1))
        return fn

    return register


def _upcast(spec: _Spec, data: Mapping[str, Any]) -> Mapping[str, Any]:
    kind, current = spec.cls.KIND, spec.cls.VERSION
    version_of = _VERSION_OF.get(kind)
    version = version_of(data) if version_of is not None else current
    while version < current:
        step = _UPCASTERS.get((kind, version))
        if step is None:
            raise ValueError(f"no upcaster for {kind!r} from version {version}")
        data = step(dict(data))
        version += 1
    return data


def stored_version(kind: str, data: Mapping[str, Any]) -> int:
    """The shape version of a stored ``kind``'s data (tests and tools)."""
    version_of = _VERSION_OF.get(kind)
    return version_of(data) if version_of is not None else _BY_KIND[kind].cls.VERSION

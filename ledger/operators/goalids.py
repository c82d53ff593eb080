"""A goal named the way people name it: a full UUID, or the first hex digits
of one (what `ledger goals` and the admin's lists print). One resolver for
the command line and the admin, so both accept and refuse the same things."""

import itertools
import re
import uuid

from ledger.models import Goal

MIN_PREFIX = 4
_HEX_PREFIX = re.compile(rf"[0-9a-f]{{{MIN_PREFIX},32}}")


class NotAGoalId(ValueError):
    """The text is neither a UUID nor a prefix of hex digits long enough."""


class NoSuchGoal(LookupError):
    """No goal has this id or prefix."""


class AmbiguousGoal(LookupError):
    """Several goals start with this prefix."""


def prefix_of(value: str) -> str | None:
    """The hex digits of a typed id prefix (hyphens and case ignored), or None."""
    digits = value.strip().lower().replace("-", "")
    return digits if _HEX_PREFIX.fullmatch(digits) else None


def matching(value: str) -> list[str]:
    """Ids of at most two goals whose id starts with ``value`` (a full UUID is its
    own, existing or not); [] when ``value`` is no id at all."""
    try:
        return [str(uuid.UUID(value.strip()))]
    except ValueError:
        pass
    digits = prefix_of(value)
    if digits is None:
        return []
    # Hyphenated as a UUID prints: PostgreSQL compares the uuid's text
    # form (with hyphens); Django strips them again for SQLite's char(32).
    cuts = (0, 8, 12, 16, 20, 32)
    hyphenated = "-".join(digits[a:b] for a, b in itertools.pairwise(cuts) if digits[a:b])
    return [str(pk) for pk in Goal.objects.filter(
        id__startswith=hyphenated).values_list("id", flat=True)[:2]]


def resolve(value: str) -> str:
    """The full id of the one goal ``value`` names (not checked to exist when
    ``value`` is a full UUID: callers load it and say "no such goal")."""
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        pass
    if prefix_of(value) is None:
        raise NotAGoalId(f"{value!r} is not a goal id (a UUID, or the first {MIN_PREFIX} or "
                         "more of its hex digits)")
    matches = matching(value)
    if len(matches) > 1:
        raise AmbiguousGoal(f"{value!r} matches several goals; give more digits")
    if not matches:
        raise NoSuchGoal(f"no such goal: {value}")
    return matches[0]

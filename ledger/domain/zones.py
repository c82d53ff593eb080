"""Time zones and calendar arithmetic for reading when a limit resets
(``ledger.domain.resets``): zones named in a failure text or by the agent,
offsets as written, and instants that saturate at the ends of the calendar.

Pure; never raises on a name it cannot read (that is simply no zone).
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta, timezone, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones


@lru_cache(maxsize=1)
def _zone_names_by_lower() -> dict[str, str]:
    return {name.lower(): name for name in available_timezones()}


_ZONE_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+)*")
_OFFSET = re.compile(
    r"(?:utc|gmt)?\s*(?P<sign>[+\-\u2212])\s*(?P<h>[0-9]{1,2})(?::?(?P<m>[0-9]{2}))?",
    re.IGNORECASE,
)


def offset_zone(spec: str) -> tzinfo | None:
    """Offsets as written ("GMT+3", "UTC+3", "+03:00", "-0500"): east of Greenwich is plus.

    The trap: the IANA names Etc/GMT+3 mean the opposite (UTC-3, POSIX's sign). Those go
    to zoneinfo, which knows; only offsets written as offsets come here.
    """
    match = _OFFSET.fullmatch(spec.strip())
    if not match:
        return None
    hours, minutes = int(match["h"]), int(match["m"] or 0)
    if hours > 14 or minutes > 59:
        return None
    delta = timedelta(hours=hours, minutes=minutes)
    return timezone(-delta if match["sign"] in "-\u2212" else delta)


@lru_cache(maxsize=256)
def named_zone(name: str) -> tzinfo | None:
    """A zone from a name in the text or the agent's ``tz``; None when it is no zone.

    Never raises: an unknown, malformed or path-like name is simply not a zone.
    """
    name = name.strip()
    if not name or len(name) > 64:
        return None
    if name.upper() in ("UTC", "GMT", "Z"):
        return UTC
    if re.match(r"(?:utc|gmt)\s*[+\-\u2212]|[+\-\u2212][0-9]", name, re.IGNORECASE):
        return offset_zone(name)
    if not _ZONE_KEY.fullmatch(name):
        return None
    for key in (name, _zone_names_by_lower().get(name.lower())):
        if key is None:
            continue
        try:
            return ZoneInfo(key)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            continue
    return None


LATEST = datetime.max.replace(tzinfo=UTC)
EARLIEST = datetime.min.replace(tzinfo=UTC)


def utc(moment: datetime) -> datetime:
    """``moment`` in UTC, saturating at the ends of the calendar instead of overflowing:
    "9999-12-31T23:59:59-05:00" is later than any instant Python can hold, which still
    makes it a reset beyond the horizon, not an unreadable one."""
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        return LATEST if moment.year > 1 else EARLIEST


def in_zone(day: date, clock: time, zone: tzinfo) -> datetime:
    # fold=0: an ambiguous wall time (the repeated hour of a DST fall-back) is read as the
    # first one; a wall time inside a spring-forward gap comes out shifted by the gap.
    return utc(datetime.combine(day, clock, tzinfo=zone))


def next_date(month: int, day: int, today: date) -> date | None:
    """The next such month-day on or after ``today`` (rolls into next year when past;
    "Feb 29" finds the next leap year)."""
    for year in range(today.year, today.year + 9):
        try:
            candidate = date(year, month, day)
        except ValueError:
            continue
        if candidate >= today:
            return candidate
    return None

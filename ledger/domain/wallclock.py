"""Instants, delays and time zones as failure texts write them.

What ``ledger.domain.resets`` reads once it has found a reset phrase: a date and wall
time in a named zone or offset ("resets 3pm (Europe/Paris)", "Oct 19th, 2025 8:39 AM"),
an ISO timestamp, an HTTP-date, an epoch, a duration ("1h 12m", "9.8s", "644ms").

Pure functions: no Django, no clock; bounded windows of text only.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime, time, timedelta, timezone, tzinfo
from decimal import Decimal, InvalidOperation
from email.utils import parsedate_to_datetime
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

# A relative delay longer than this is no reset time but a misread number (GitHub's epoch
# X-RateLimit-Reset printed as "Retry after 1792152901 seconds"); it is ignored.
_MAX_DELAY_MICROSECONDS = 366 * 86_400_000_000

_MONTH_NUMBERS = {
    name: number
    for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
        start=1,
    )
}
_MONTH = (
    r"(?P<mon>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b\.?"
)
_WEEKDAY = r"(?:(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?,?\s+)?"
# A clock time needs minutes or am/pm: "3pm", "8:39 AM", "10:59am", "12:55", "07:28:00",
# "10:15:00.123". A bare "5" (as in "resets 5 hours") is no time.
_AMPM = r"[ap]\.?\s?m\b\.?"
_TIME = (
    r"(?P<hour>[0-9]{1,2})"
    r"(?:(?::(?P<minute>[0-9]{2})(?::(?P<second>[0-9]{2})(?:[.,](?P<frac>[0-9]{1,9}))?)?"
    rf"(?:\s*(?P<ampm>{_AMPM}))?)"
    rf"|\s*(?P<ampm2>{_AMPM}))"
)
# What may follow a time or date: "(America/New_York)", "(Etc/GMT+5)", "GMT+3", "UTC+03:00",
# "+03:00", "Z", "UTC", "GMT". Anything else (IST, CET, ...) is left alone: abbreviations
# are ambiguous, so the agent's own zone is used instead.
_ZONE = (
    r"(?:\s*(?:\((?P<pzone>[^()\n]{1,40})\)"
    r"|(?P<off>(?:utc|gmt)\s*[+\-\u2212]\s*[0-9]{1,2}(?::?[0-9]{2})?\b|[+\-\u2212][0-9]{2}:?[0-9]{2}\b)"
    r"|(?P<utc>z\b|utc\b|gmt\b)))?"
)
_DATE_TIME_GLUE = r"(?:t|\s+at\s+|,\s*|\s+)"

ISO = re.compile(
    rf"(?P<y>[0-9]{{4}})-(?P<mo>[0-9]{{2}})-(?P<d>[0-9]{{2}})(?:{_DATE_TIME_GLUE}{_TIME})?{_ZONE}",
    re.IGNORECASE,
)
# HTTP-date and other day-first dates: "Wed, 21 Oct 2026 07:28:00 GMT".
_DAY_FIRST = re.compile(
    rf"{_WEEKDAY}(?P<d>[0-9]{{1,2}})[\s-]+{_MONTH}[\s-]+(?P<y>[0-9]{{4}})"
    rf"(?:\s+{_TIME})?{_ZONE}",
    re.IGNORECASE,
)
# Month first: "Oct 19th, 2025 8:39 AM", "Aug 20, 2026, 7:38 AM", "Jan 12, 10:59am
# (America/New_York)", "Sep 15 at 7pm", "Oct 19 at 8:39 AM GMT+3", "Aug 15".
_MONTH_FIRST = re.compile(
    rf"{_WEEKDAY}{_MONTH}\s*(?P<d>[0-9]{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(?P<y>[0-9]{{4}})\b)?"
    rf"(?:(?:,\s*|\s+at\s+|\s+){_TIME})?{_ZONE}",
    re.IGNORECASE,
)
_TIME_ONLY = re.compile(rf"{_TIME}{_ZONE}", re.IGNORECASE)
_EPOCH = re.compile(r"([0-9]{13}|[0-9]{10})(?![0-9.])")
# A bare number is the whole value: "30", "1.5" (not the 2026 of "2026-12-02T10:15:00Z").
_NUMBER = re.compile(r"([0-9]{1,12}(?:\.[0-9]{1,9})?)(?=$|[\s,;\"'\\}\])])")

# Durations: "9.816s", "644ms", "1m30s", "6m0s", "12h34m16s", "2h 30m", "4 hours",
# "4 days 3 hours 12 minutes" (Codex may wrap it over lines), "an hour".
_UNIT_MICROSECONDS = {
    "ms": 1_000,
    "s": 1_000_000,
    "m": 60_000_000,
    "h": 3_600_000_000,
    "d": 86_400_000_000,
    "w": 604_800_000_000,
}
_DURATION_PART = re.compile(
    r"(?P<n>[0-9]{1,12}(?:\.[0-9]{1,9})?)\s*"
    r"(?P<u>milliseconds?|msecs?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h"
    r"|days?|d|weeks?|w)(?![a-z])"
    # "an hour", "a minute": spelled-out units only, so "in as little as" is no "a s".
    r"|(?P<one>an?|one)\s+(?P<word>millisecond|second|minute|hour|day|week)\b",
    re.IGNORECASE,
)
_DURATION_GLUE = re.compile(r"[\s,]*(?:and\s+)?")


@lru_cache(maxsize=1)
def _zone_names_by_lower() -> dict[str, str]:
    return {name.lower(): name for name in available_timezones()}


_ZONE_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+)*")
_OFFSET = re.compile(
    r"(?:utc|gmt)?\s*(?P<sign>[+\-\u2212])\s*(?P<h>[0-9]{1,2})(?::?(?P<m>[0-9]{2}))?",
    re.IGNORECASE,
)


def _offset_zone(spec: str) -> tzinfo | None:
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
        return _offset_zone(name)
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


def _zone_of(match: re.Match[str], default: tzinfo) -> tzinfo:
    if match["off"]:
        return _offset_zone(match["off"]) or default
    if match["utc"]:
        return UTC
    if match["pzone"]:
        return named_zone(match["pzone"]) or default
    return default


def _clock(match: re.Match[str]) -> time | None:
    """The time of day a match names, midnight when it names none; None when invalid.

    12-hour clocks: "12am" is midnight and "12pm" noon; "0am" and "13pm" are no times.
    """
    if match["hour"] is None:
        return time(0, 0)
    hour, minute, second = int(match["hour"]), int(match["minute"] or 0), int(match["second"] or 0)
    marker = (match["ampm"] or match["ampm2"] or "").lower()
    if marker:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if marker.startswith("p") else 0)
    elif hour > 23:
        return None
    if minute > 59 or second > 59:
        return None
    microsecond = int((match["frac"] or "").ljust(6, "0")[:6])
    return time(hour, minute, second, microsecond)


LATEST = datetime.max.replace(tzinfo=UTC)
_EARLIEST = datetime.min.replace(tzinfo=UTC)


def utc(moment: datetime) -> datetime:
    """``moment`` in UTC, saturating at the ends of the calendar instead of overflowing:
    "9999-12-31T23:59:59-05:00" is later than any instant Python can hold, which still
    makes it a reset beyond the horizon, not an unreadable one."""
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        return LATEST if moment.year > 1 else _EARLIEST


def _in_zone(day: date, clock: time, zone: tzinfo) -> datetime:
    # fold=0: an ambiguous wall time (the repeated hour of a DST fall-back) is read as the
    # first one; a wall time inside a spring-forward gap comes out shifted by the gap.
    return utc(datetime.combine(day, clock, tzinfo=zone))


def _next_date(month: int, day: int, today: date) -> date | None:
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


def when(window: str, now: datetime, default_zone: tzinfo) -> datetime | None:
    """The instant a date/time expression at the start of ``window`` names."""
    if match := ISO.match(window):
        clock = _clock(match)
        if clock is None:
            return None
        day = date(int(match["y"]), int(match["mo"]), int(match["d"]))
        return _in_zone(day, clock, _zone_of(match, default_zone))
    match = _DAY_FIRST.match(window) or _MONTH_FIRST.match(window)
    if match:
        clock = _clock(match)
        if clock is None:
            return None
        zone = _zone_of(match, default_zone)
        month = _MONTH_NUMBERS[match["mon"][:3].lower()]
        if match["y"]:
            day = date(int(match["y"]), month, int(match["d"]))
        else:
            # No year: the next such date in the zone that names it, today included (a
            # time earlier today is the past, not next year).
            found = _next_date(month, int(match["d"]), now.astimezone(zone).date())
            if found is None:
                return None
            day = found
        return _in_zone(day, clock, zone)
    if match := _TIME_ONLY.match(window):
        clock = _clock(match)
        if clock is None:
            return None
        # No date: the next such wall time at or after `now` in the zone that names it
        # (the parenthesised zone, else the agent's). Never "today" when that is past:
        # "resets 2:30am" read at 11pm is tomorrow's 2:30am.
        zone = _zone_of(match, default_zone)
        today = now.astimezone(zone).date()
        candidate = _in_zone(today, clock, zone)
        if candidate < now:
            candidate = _in_zone(today + timedelta(days=1), clock, zone)
        return candidate
    return None


def duration(window: str) -> timedelta | None:
    """A delay at the start of ``window``; None when there is none or it is implausible."""
    total = Decimal(0)
    position, parts = 0, 0
    while parts < 8:
        match = _DURATION_PART.match(window, position)
        if not match:
            break
        amount = Decimal(match["n"]) if match["n"] else Decimal(1)
        unit = (match["u"] or match["word"]).lower()
        if unit.startswith(("ms", "msec", "milli")):
            key = "ms"
        elif unit.startswith("mi") or unit == "m":
            key = "m"
        else:
            key = unit[0]
        total += amount * _UNIT_MICROSECONDS[key]
        parts += 1
        position = _DURATION_GLUE.match(window, match.end()).end()
    if not parts or total > _MAX_DELAY_MICROSECONDS:
        return None
    return timedelta(microseconds=math.ceil(total))  # "58.934310785s": never a hair early


def delay(raw: str) -> timedelta | None:
    """A duration ("1h 12m", "6m0s") or a number of seconds ("30", "1.5")."""
    found = duration(raw)
    return found if found is not None else seconds(raw)


def seconds(raw: str, scale: int = 1_000_000) -> timedelta | None:
    match = _NUMBER.match(raw)
    if not match:
        return None
    try:
        total = Decimal(match[1]) * scale
    except InvalidOperation:
        return None
    if total > _MAX_DELAY_MICROSECONDS:
        return None
    return timedelta(microseconds=math.ceil(total))


def epoch(raw: str) -> datetime | None:
    """Epoch seconds (10 digits) or milliseconds (13 digits)."""
    match = _EPOCH.match(raw)
    if not match:
        return None
    value = int(match[1])
    return datetime.fromtimestamp(value / 1000 if len(match[1]) == 13 else value, UTC)


def http_date(raw: str) -> datetime | None:
    try:
        parsed = parsedate_to_datetime(raw.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed is None:
        return None
    return utc(parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC))

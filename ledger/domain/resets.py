"""When a provider's limit resets, read from its failure text or a Retry-After value.

``parse_reset`` finds the instant at which the provider says the limit resets. It reads
what providers really print: Claude Code and claude.ai usage-limit notices, the Anthropic
API, OpenAI's API and Codex CLI, Gemini's RESOURCE_EXHAUSTED bodies, rate-limit headers
pasted into logs. tests/test_failures.py names the source of every message it checks.

Both ``parse_reset`` and ``parse_retry_after`` answer an instant within ``[now, now +
RESET_HORIZON]``: a reset already past is ``now`` (the limit has lifted), and one further
than a week away is the horizon (see ``RESET_HORIZON``).

Pure functions: no Django, no clock, no network. The caller passes ``now``; both functions
run in time linear in the text, so a many-kilobyte log is fine.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from decimal import Decimal, InvalidOperation
from email.utils import parsedate_to_datetime

from ledger.domain.failures import ASCII_LOWER
from ledger.domain.zones import LATEST, in_zone, named_zone, next_date, offset_zone, utc

# The furthest a parsed reset may lie from `now`. The usage windows providers print are
# per-minute, per-day, 5-hour and weekly ones, so a week covers every window that resets by
# itself. A stated reset further away is either a misread, a typo or a monthly/billing cap
# (Codex "resets on Jul 3", Copilot "wait 587 hours", a spend limit "until 2026-04-01"), and
# an instant near the year 9999 overflows any arithmetic done on it later. It is read as
# the horizon: the goal wakes then, finds the limit still there, and pauses again (with its
# backoff and its continuation budget), so a goal is never paused forever by one message.
RESET_HORIZON = timedelta(days=7)


# Three tiers of evidence; the first tier with any candidate decides, and within a tier
# the latest instant wins (waking late costs minutes, waking early re-hits the limit).
_ABSOLUTE = 0  # an instant this failure names: "resets 3pm (Europe/Paris)", "|1760000400",
#                "resets_at": 1777936568, "try again at Oct 19th, 2025 8:39 AM", ISO dates
_RELATIVE = 1  # a delay this failure names: "try again in 9.8s", "retryDelay": "37s",
#                "retry-after: 30". It counts from when the text was printed, which only
#                `now` approximates, so an exact instant beats it.
_WINDOW = 2  # rate-limit window headers sent with every response, exhausted or not:
#              x-ratelimit-reset-tokens, anthropic-ratelimit-*-reset, X-RateLimit-Reset,
#              x-codex-*-reset-at. Codex prints its weekly window's reset beside the 5-hour
#              one it actually hit, so these count only when nothing better is there.

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

_ISO = re.compile(
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

_CONNECTOR = re.compile(r"[\s:]*(?:(?P<conn>at|on|after|in|within|by|for)\b[\s:]*)?", re.I)

# Where a reset is announced. Scanned once, left to right, over an ASCII-lowercased copy
# (Python's re is several times slower with IGNORECASE on long texts); what follows each
# hit (a bounded window of the original text) is parsed on its own, so the whole scan stays
# linear in the text.
_TRIGGER = re.compile(
    # Claude Code's raw form: "Claude AI usage limit reached|1760000400" (epoch seconds).
    r"(?P<pipe>limit\s+reached\s*\|\s*)"
    # Header lines and JSON fields, quoted or not, escaped or not.
    r"|(?P<key>retry[-_]after[-_]ms|retry[-_]after(?:[-_]seconds)?|retrydelay"
    r"|resets?_?in_?seconds|resets?_?at|x-ratelimit-reset(?:-[a-z_]+)?"
    r"|anthropic-ratelimit-[a-z0-9-]*?reset|x-codex-[a-z0-9-]*?reset-(?:at|after-seconds)"
    r"|ratelimit-reset(?:time)?)"
    r"\\{0,3}[\"']?\s*[:=]\s*"
    # Prose. Not "retrying in 4 seconds": that is a client's own backoff, not the provider's.
    r"|(?P<verb>resets?|try\s+again|retry|available(?:\s+again)?|regain\s+access|until|wait)"
    r"(?![\w-])"
)
_WINDOW_CHARS = 96


def _zone_of(match: re.Match[str], default: tzinfo) -> tzinfo:
    if match["off"]:
        return offset_zone(match["off"]) or default
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


def _when(window: str, now: datetime, default_zone: tzinfo) -> datetime | None:
    """The instant a date/time expression at the start of ``window`` names."""
    if match := _ISO.match(window):
        clock = _clock(match)
        if clock is None:
            return None
        day = date(int(match["y"]), int(match["mo"]), int(match["d"]))
        return in_zone(day, clock, _zone_of(match, default_zone))
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
            found = next_date(month, int(match["d"]), now.astimezone(zone).date())
            if found is None:
                return None
            day = found
        return in_zone(day, clock, zone)
    if match := _TIME_ONLY.match(window):
        clock = _clock(match)
        if clock is None:
            return None
        # No date: the next such wall time at or after `now` in the zone that names it
        # (the parenthesised zone, else the agent's). Never "today" when that is past:
        # "resets 2:30am" read at 11pm is tomorrow's 2:30am.
        zone = _zone_of(match, default_zone)
        today = now.astimezone(zone).date()
        candidate = in_zone(today, clock, zone)
        if candidate < now:
            candidate = in_zone(today + timedelta(days=1), clock, zone)
        return candidate
    return None


def _duration(window: str) -> timedelta | None:
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


def _seconds(raw: str, scale: int = 1_000_000) -> timedelta | None:
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


def _epoch(raw: str) -> datetime | None:
    """Epoch seconds (10 digits) or milliseconds (13 digits)."""
    match = _EPOCH.match(raw)
    if not match:
        return None
    value = int(match[1])
    return datetime.fromtimestamp(value / 1000 if len(match[1]) == 13 else value, UTC)


def _http_date(raw: str) -> datetime | None:
    try:
        parsed = parsedate_to_datetime(raw.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed is None:
        return None
    return utc(parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC))


def _header_value(key: str, raw: str, now: datetime, zone: tzinfo) -> tuple[int, datetime] | None:
    """The reset a header line or JSON field names; ``raw`` is what follows its colon."""
    value = re.split(r"\\n|\n|\r", raw, maxsplit=1)[0].strip().lstrip("\\\"'").strip()
    name = key.replace("_", "").replace("-", "")
    if name == "retryafterms":  # retry-after-ms: 1500
        delta = _seconds(value, 1_000)
        return (_RELATIVE, now + delta) if delta is not None else None
    if name.startswith("retry") or name in ("resetsinseconds", "resetinseconds"):
        # retry-after: 30 | retry-after: Wed, 21 Oct 2026 07:28:00 GMT | "retryDelay": "37s"
        # | "resets_in_seconds": 602705 | "retry_after": 1.5
        if (delta := _duration(value)) is not None or (delta := _seconds(value)) is not None:
            return _RELATIVE, now + delta
        instant = _http_date(value) or _when(value, now, zone)
        return (_ABSOLUTE, instant) if instant is not None else None
    if name in ("resetsat", "resetat"):  # "resets_at": 1777936568 (Codex), "resetsAt": ms
        instant = _epoch(value) or _when(value, now, zone)
        return (_ABSOLUTE, instant) if instant is not None else None
    # A window header. Its value is whatever that provider uses: epoch seconds (GitHub,
    # x-codex-*-reset-at, anthropic-ratelimit-unified-reset), a Go duration (OpenAI's
    # "6m0s"), delta seconds (the IETF draft's RateLimit-Reset), RFC 3339 (Anthropic).
    if (instant := _epoch(value) or _when(value, now, zone) or _http_date(value)) is not None:
        return _WINDOW, instant
    if (delta := _duration(value)) is not None or (delta := _seconds(value)) is not None:
        return _WINDOW, now + delta
    return None


def _prose(verb: str, raw: str, now: datetime, zone: tzinfo) -> tuple[int, datetime] | None:
    """The reset a sentence names after its verb: "resets 3pm (America/New_York)", "try
    again in 4 days 3 hours", "retry after 2026-12-03 00:00 UTC", "regain access on ..."."""
    connector = _CONNECTOR.match(raw)
    word = (connector["conn"] or "").lower()
    rest = raw[connector.end() :]
    if verb == "wait" or word in ("in", "within", "for"):
        delta = _duration(rest)
        return (_RELATIVE, now + delta) if delta is not None else None
    if word == "after" and (delta := _duration(rest)) is not None:
        return _RELATIVE, now + delta
    instant = _when(rest, now, zone)
    return (_ABSOLUTE, instant) if instant is not None else None


def _horizon(now: datetime) -> datetime:
    try:
        return now + RESET_HORIZON
    except OverflowError:  # `now` within a week of the year 10000
        return LATEST


def _within_horizon(instant: datetime, now: datetime) -> datetime:
    """Clamp to ``[now, now + RESET_HORIZON]``: a past reset means "now", a later one than
    the horizon means "the horizon" (see ``RESET_HORIZON`` for why)."""
    return min(max(instant, now), _horizon(now))


_DELTA_SECONDS = re.compile(r"[0-9]{1,40}(?:\.[0-9]{1,9})?")


def _stated_retry_after(text: str, now: datetime) -> datetime | None:
    """The instant a Retry-After value names, unclamped (saturating at the end of the
    calendar); None when it is no Retry-After value."""
    if _DELTA_SECONDS.fullmatch(text):
        seconds = Decimal(text)
        if seconds > RESET_HORIZON.total_seconds():
            return _horizon(now)  # absurd but well formed: the horizon is all it can mean
        return now + timedelta(microseconds=math.ceil(seconds * 1_000_000))
    if (instant := _http_date(text)) is not None:
        return instant
    # ISO 8601 / RFC 3339 with a time and an offset ("Z", "+02:00", "UTC"): a timestamp
    # without one names no instant (the agent's local time? the server's?).
    match = _ISO.fullmatch(text)
    if match and match["hour"] is not None and (match["off"] or match["utc"]):
        return _when(text, now, UTC)
    return None


def parse_retry_after(value: object, now: datetime) -> datetime | None:
    """An HTTP Retry-After value: delta-seconds ("120", tolerated "1.5"), an HTTP-date
    ("Wed, 21 Oct 2026 07:28:00 GMT") or an ISO 8601 timestamp with an offset
    ("2026-12-03T10:00:00Z"). None when it is none of these (negative, "soon", a date that
    does not exist, a timestamp without an offset); otherwise an instant within
    ``[now, now + RESET_HORIZON]``. Never raises; a naive ``now`` is taken as UTC."""
    try:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            return None
        if not isinstance(now, datetime):
            return None
        now = utc(now if now.tzinfo else now.replace(tzinfo=UTC))
        instant = _stated_retry_after(str(value).strip(), now)
        return None if instant is None else _within_horizon(instant, now)
    except (ValueError, OverflowError, ArithmeticError):
        return None


def parse_reset(
    text: str, *, now: datetime, tz: str = "UTC", retry_after: str | None = None
) -> datetime | None:
    """The instant (aware, UTC) at which to expect the limit lifted, with no safety margin
    added: the reset the provider states (``stated_reset``), clamped to ``[now, now +
    RESET_HORIZON]``. None when nothing names a reset. Never raises.

    A reset already past answers ``now``: the limit has lifted (or the text is stale), and
    either way the goal may try again at once. A reset beyond the horizon answers the
    horizon; see ``RESET_HORIZON``.
    """
    try:
        if not isinstance(now, datetime):
            return None
        now = utc(now if now.tzinfo else now.replace(tzinfo=UTC))
        stated = stated_reset(text, now=now, tz=tz, retry_after=retry_after)
        return None if stated is None else _within_horizon(stated, now)
    except Exception:  # the contract: any input, no exception
        return None


def stated_reset(
    text: str, *, now: datetime, tz: str = "UTC", retry_after: str | None = None
) -> datetime | None:
    """The instant (aware, UTC) at which the provider says the limit resets, as stated:
    not clamped, so it may be past or years away. Schedulers want ``parse_reset``; this is
    what it clamps, kept separate so that tests and diagnostics can check the reading
    itself. None when the text names none. Never raises.

    Precedence:

    * A valid ``retry_after`` (see ``parse_retry_after``) wins over the text. An invalid
      one is ignored here, not fatal (the API refuses it before it gets here).
    * Then an instant the failure names (a date, a wall time, an epoch, an ISO timestamp),
      then a delay it names ("try again in 9.8s", "retryDelay": "37s", "retry-after: 30"),
      then window headers printed with every response (x-ratelimit-reset-*,
      anthropic-ratelimit-*-reset, X-RateLimit-Reset, x-codex-*-reset-at). Within the
      first kind present, the latest instant wins: waking early only re-hits the limit.
    * Delays count from ``now``: the text does not say when it was printed.

    Reading times:

    * A time without a date is the next such wall time at or after ``now``, in the zone
      the text names in parentheses ("resets 3pm (America/New_York)"), else in ``tz``.
    * A month-day without a year is the next such date (today included; a date already
      past this year rolls into next year).
    * ``Etc/GMT+5`` is UTC-5 (POSIX sign, as zoneinfo reads it); "GMT+3", "UTC+3" and
      "+03:00" written as offsets are UTC+3. Abbreviations (IST, CET) are ambiguous and
      ignored: the time is read in ``tz``.
    * An unknown zone name, in the text or in ``tz``, falls back to ``tz``, then to UTC.
    * Epochs may be seconds (10 digits) or milliseconds (13); seconds may be fractional
      ("9.8s") or milliseconds ("644ms"). A delay over 366 days is taken as a misread.
    * Relative phrases that are a client's own backoff ("Retrying in 4 seconds…") and
      timestamps outside a reset phrase (a log line's "timestamp") are not resets.

    A naive ``now`` is taken as UTC.
    """
    try:
        if not isinstance(now, datetime):
            return None
        now = utc(now if now.tzinfo else now.replace(tzinfo=UTC))
        from_header = _header_reset(retry_after, now)
        if from_header is not None:
            return from_header
        if not isinstance(text, str) or not text:
            return None
        zone = (named_zone(tz) if isinstance(tz, str) else None) or UTC
        found = _found(text, now, zone)
        for tier in (_ABSOLUTE, _RELATIVE, _WINDOW):
            if found[tier]:
                return max(found[tier]).astimezone(UTC)
        return None
    except Exception:  # the contract: any input, no exception
        return None


def _header_reset(retry_after: object, now: datetime) -> datetime | None:
    """The instant a valid Retry-After value names (it wins over the text), else None."""
    if isinstance(retry_after, str | int | float) and not isinstance(retry_after, bool):
        try:
            return _stated_retry_after(str(retry_after).strip(), now)
        except (ValueError, OverflowError, ArithmeticError):
            return None
    return None


def _found(text: str, now: datetime, zone: tzinfo) -> dict[int, list[datetime]]:
    """Every reset the text names, by kind (_ABSOLUTE, _RELATIVE, _WINDOW)."""
    found: dict[int, list[datetime]] = {_ABSOLUTE: [], _RELATIVE: [], _WINDOW: []}
    lowered = text.translate(ASCII_LOWER)  # same length, so positions carry over
    for trigger in _TRIGGER.finditer(lowered):
        before = lowered[trigger.start() - 1] if trigger.start() else " "
        if before.isalnum() or before in "_-":
            continue  # inside a longer word: "presets", "x-foo-reset"
        raw = text[trigger.end() : trigger.end() + _WINDOW_CHARS]
        try:
            if trigger["pipe"] is not None:
                instant = _epoch(raw)
                hit = (_ABSOLUTE, instant) if instant is not None else None
            elif trigger["key"] is not None:
                hit = _header_value(trigger["key"].lower(), raw, now, zone)
            else:
                verb = re.sub(r"\s+", " ", trigger["verb"].lower())
                hit = _prose(verb, raw, now, zone)
        except (ValueError, OverflowError, KeyError):
            hit = None  # one unreadable phrase (Feb 30, year 99999) spoils no other
        if hit is not None:
            found[hit[0]].append(hit[1])
    return found

"""When a provider's limit resets, read from its failure text or a Retry-After value.

``parse_reset`` finds the instant at which the provider says the limit resets. It reads
what providers really print: Claude Code and claude.ai usage-limit notices, the Anthropic
API, OpenAI's API and Codex CLI, Gemini's RESOURCE_EXHAUSTED bodies, rate-limit headers
pasted into logs. tests/domain/test_failures.py names the source of every message it checks.

Both ``parse_reset`` and ``parse_retry_after`` answer an instant within ``[now, now +
RESET_HORIZON]``: a reset already past is ``now`` (the limit has lifted), and one further
than a week away is the horizon (see ``RESET_HORIZON``).

Pure functions: no Django, no clock, no network. The caller passes ``now``; both functions
run in time linear in the text, so a many-kilobyte log is fine.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta, tzinfo
from decimal import Decimal

from ledger.domain import wallclock
from ledger.domain.failures import ASCII_LOWER, unwrapped

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


def _header_value(key: str, raw: str, now: datetime, zone: tzinfo) -> tuple[int, datetime] | None:
    """The reset a header line or JSON field names; ``raw`` is what follows its colon."""
    value = re.split(r"\\n|\n|\r", raw, maxsplit=1)[0].strip().lstrip("\\\"'").strip()
    name = key.replace("_", "").replace("-", "")
    if name == "retryafterms":  # retry-after-ms: 1500
        delta = wallclock.seconds(value, 1_000)
        return (_RELATIVE, now + delta) if delta is not None else None
    if name.startswith("retry") or name in ("resetsinseconds", "resetinseconds"):
        # retry-after: 30 | retry-after: Wed, 21 Oct 2026 07:28:00 GMT | "retryDelay": "37s"
        # | "resets_in_seconds": 602705 | "retry_after": 1.5
        if (delta := wallclock.delay(value)) is not None:
            return _RELATIVE, now + delta
        instant = wallclock.http_date(value) or wallclock.when(value, now, zone)
        return (_ABSOLUTE, instant) if instant is not None else None
    if name in ("resetsat", "resetat"):  # "resets_at": 1777936568 (Codex), "resetsAt": ms
        instant = wallclock.epoch(value) or wallclock.when(value, now, zone)
        return (_ABSOLUTE, instant) if instant is not None else None
    # A window header. Its value is whatever that provider uses: epoch seconds (GitHub,
    # x-codex-*-reset-at, anthropic-ratelimit-unified-reset), a Go duration (OpenAI's
    # "6m0s"), delta seconds (the IETF draft's RateLimit-Reset), RFC 3339 (Anthropic).
    instant = (wallclock.epoch(value) or wallclock.when(value, now, zone)
               or wallclock.http_date(value))
    if instant is not None:
        return _WINDOW, instant
    if (delta := wallclock.delay(value)) is not None:
        return _WINDOW, now + delta
    return None


def _prose(verb: str, raw: str, now: datetime, zone: tzinfo) -> tuple[int, datetime] | None:
    """The reset a sentence names after its verb: "resets 3pm (America/New_York)", "try
    again in 4 days 3 hours", "retry after 2026-12-03 00:00 UTC", "regain access on ..."."""
    connector = _CONNECTOR.match(raw)
    word = (connector["conn"] or "").lower()
    rest = raw[connector.end() :]
    if verb == "wait" or word in ("in", "within", "for"):
        delta = wallclock.duration(rest)
        return (_RELATIVE, now + delta) if delta is not None else None
    if word == "after" and (delta := wallclock.duration(rest)) is not None:
        return _RELATIVE, now + delta
    instant = wallclock.when(rest, now, zone)
    return (_ABSOLUTE, instant) if instant is not None else None


def _horizon(now: datetime) -> datetime:
    try:
        return now + RESET_HORIZON
    except OverflowError:  # `now` within a week of the year 10000
        return wallclock.LATEST


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
    if (instant := wallclock.http_date(text)) is not None:
        return instant
    # ISO 8601 / RFC 3339 with a time and an offset ("Z", "+02:00", "UTC"): a timestamp
    # without one names no instant (the agent's local time? the server's?).
    match = wallclock.ISO.fullmatch(text)
    if match and match["hour"] is not None and (match["off"] or match["utc"]):
        return wallclock.when(text, now, UTC)
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
        now = _aware_utc(now)
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
        now = _aware_utc(now)
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
        now = _aware_utc(now)
        from_header = _header_reset(retry_after, now)
        if from_header is not None:
            return from_header
        if not isinstance(text, str) or not text:
            return None
        zone = (wallclock.named_zone(tz) if isinstance(tz, str) else None) or UTC
        if "\n" in text:
            # A terminal's hard wraps first undone ("resets 3am (Europe/Ist\n  anbul)"
            # would read the wrong zone as given); the text as given when that reads
            # nothing (a log whose lines the join ran together).
            joined = _text_reset(unwrapped(text), now, zone)
            if joined is not None:
                return joined
        return _text_reset(text, now, zone)
    except Exception:  # the contract: any input, no exception
        return None


def _aware_utc(now: datetime) -> datetime:
    """``now`` in UTC; a naive one is taken as UTC."""
    return wallclock.utc(now if now.tzinfo else now.replace(tzinfo=UTC))


def _header_reset(retry_after: object, now: datetime) -> datetime | None:
    """What a Retry-After value states, or None when there is none or it is invalid
    (ignored here, not fatal: the API refuses an invalid one before it gets here)."""
    if not isinstance(retry_after, str | int | float) or isinstance(retry_after, bool):
        return None
    try:
        return _stated_retry_after(str(retry_after).strip(), now)
    except (ValueError, OverflowError, ArithmeticError):
        return None


def _text_reset(text: str, now: datetime, zone: tzinfo) -> datetime | None:
    """The reset the text states: the latest instant of the first tier with any."""
    found: dict[int, list[datetime]] = {_ABSOLUTE: [], _RELATIVE: [], _WINDOW: []}
    lowered = text.translate(ASCII_LOWER)  # same length, so positions carry over
    for trigger in _TRIGGER.finditer(lowered):
        before = lowered[trigger.start() - 1] if trigger.start() else " "
        if before.isalnum() or before in "_-":
            continue  # inside a longer word: "presets", "x-foo-reset"
        try:
            hit = _hit(trigger, text[trigger.end() : trigger.end() + _WINDOW_CHARS], now, zone)
        except (ValueError, OverflowError, KeyError):
            hit = None  # one unreadable phrase (Feb 30, year 99999) spoils no other
        if hit is not None:
            found[hit[0]].append(hit[1])
    for tier in (_ABSOLUTE, _RELATIVE, _WINDOW):
        if found[tier]:
            return max(found[tier]).astimezone(UTC)
    return None


def _hit(trigger: re.Match[str], raw: str, now: datetime,
         zone: tzinfo) -> tuple[int, datetime] | None:
    """The tier and instant one reset phrase names (``raw`` is what follows it)."""
    if trigger["pipe"] is not None:
        instant = wallclock.epoch(raw)
        return (_ABSOLUTE, instant) if instant is not None else None
    if trigger["key"] is not None:
        return _header_value(trigger["key"].lower(), raw, now, zone)
    return _prose(re.sub(r"\s+", " ", trigger["verb"].lower()), raw, now, zone)

"""Plain text for people: one safe line, an instant in the one format every
page and command uses, a short list. Pure: each event kind's ``summary``
(its one line in `ledger show` and the admin's timeline) is written with
these, and the terminal renders goals with the same ones.

Everything shown may come from an agent (objectives, steps, notes), so it
goes through ``clean``: one line, no control characters. An ANSI escape in a
step name would otherwise repaint the operator's terminal.
"""

import re
from datetime import UTC, datetime

# C0 and C1 controls (ESC among them), DEL, and the bidirectional overrides
# that can make a line read differently from what it contains.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_BLANKS = re.compile(r"[\t\n\r]+| {2,}")


def clean(value: object, width: int | None = None, *, keep_end: bool = False) -> str:
    """``value`` as one safe line, shortened to ``width`` with an ellipsis
    (keeping the end instead of the start for paths)."""
    text = _BLANKS.sub(" ", _UNSAFE.sub("\ufffd", str(value))).strip()
    if width is not None and len(text) > width:
        text = "…" + text[-(width - 1):] if keep_end else text[:width - 1] + "…"
    return text


def moment(value: str | datetime | None) -> datetime | None:
    """An instant (an aware datetime or its ISO text) in UTC; None when there
    is none or it does not read as one."""
    if not value:
        return None
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    try:
        return datetime.fromisoformat(value).astimezone(UTC)
    except (TypeError, ValueError):
        return None


def short(value: object) -> str:
    """An instant inside a summary, in the one format of every page and command
    (UTC to the second, the zone said: `12-06 23:15:00` read as local time)."""
    at = moment(value if isinstance(value, str | datetime) else None)
    return at.strftime("%Y-%m-%d %H:%M:%S UTC") if at else clean(value or "?")


def items(values: object, limit: int = 3) -> str:
    """The first ``limit`` of a list, each one clean line, and how many more."""
    shown = [clean(v) for v in values] if isinstance(values, list | tuple) else []
    more = f" (+{len(shown) - limit})" if len(shown) > limit else ""
    return "; ".join(shown[:limit]) + more


def known(value: object) -> object:
    """A field an older or damaged event lacks (decoded as None) reads "?"."""
    return "?" if value is None else value

"""Times in the admin's templates, in the one format every page and command
uses: UTC to the second (``2026-12-06 23:15:28 UTC``), with the relative time
beside it where a reader asks "since when" (``… UTC (9m ago)``). Before, pages
mixed that, ``12-06 23:15:00``, ISO with a ``Z``, and "9 minutes ago" alone.

``{% load wltime %}`` then ``{{ value|utc }}`` or ``{{ value|utc_ago }}``; a
value is a datetime or an ISO 8601 string (what the events' payloads hold)."""

from datetime import datetime

from django import template
from django.utils.html import format_html

from ledger.eventstore import clock
from ledger.operators import terminal

register = template.Library()


@register.filter
def utc(value: str | datetime | None) -> str:
    """``2026-12-06 23:15:28 UTC``; ``—`` when there is no instant."""
    text = terminal.when(value)
    return "—" if text == "-" else f"{text} UTC"


@register.filter
def utc_ago(value: str | datetime | None) -> str:
    """The instant and, beside it, how long ago (or in how long) from now."""
    text = utc(value)
    if text == "—":
        return text
    moment = terminal.when(value).replace(" ", "T") + "Z"
    return format_html('<time datetime="{}">{}</time> <span class="wl-ago">({})</span>',
                       moment, text, terminal.relative(value, clock.now()))


@register.filter
def utc_cell(value: str | datetime | None) -> str:
    """An instant in a table cell, as the admin's lists show it: the date and
    the time each unbroken, so a narrow column wraps between them and never
    at the date's hyphens (``.wl-time`` in ledger/static/ledger/admin.css)."""
    text = terminal.when(value)
    if text == "-":
        return "—"
    day, _, time = text.partition(" ")
    return format_html('<time class="wl-time" datetime="{}"><span>{}</span> <span>{} UTC</span>'
                       '</time>', text.replace(" ", "T") + "Z", day, time)

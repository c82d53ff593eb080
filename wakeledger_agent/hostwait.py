"""A provider wait the host reports while it runs, read from its output line
by line: the host is alive and running, but waits inside its own retry for
the provider's reset.

Claude Code 2.1.332 with ``CLAUDE_CODE_RETRY_WATCHDOG`` (2.1.199+) waits in
the process for a usage limit's reset, for hours, printing nothing in its
``json`` and ``text`` output formats. In ``--output-format stream-json
--verbose`` it says so, as measured against tests/fake_anthropic.py:

- before each retry, ``{"type": "system", "subtype": "api_retry", "error":
  "rate_limit", "error_status": 429, "retry_delay_ms": N, …}`` (the wait up
  to the reset the 429's ``anthropic-ratelimit-unified-reset`` states);
- on a claude.ai account, ``{"type": "rate_limit_event", "rate_limit_info":
  {"status": "rejected", "resetsAt": EPOCH, "rateLimitType": "five_hour"}}``.

Only Claude Code's own fields are read (its class and the instant): no
provider text. Other lines, and any other host's, are None.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from wakeledger_agent import runend
from wakeledger_agent.child import Silence

# A wait shorter than this is a retry's backoff, not a wait worth a line in
# the goal's history (a per-minute limit's seconds; a 529's backoff).
MIN_WAIT = timedelta(seconds=30)
# A line longer than this is a message's content, never one of these events.
MAX_LINE = 8192


@dataclass(frozen=True)
class ProviderWait:
    """The host waits for the provider until ``until``, for a failure of ``error_class``."""

    until: datetime
    error_class: str


def from_stream_line(line: str, now: datetime) -> ProviderWait | None:
    """The provider wait one stream-json line reports, if it reports one
    worth showing (``MIN_WAIT`` or longer, a rate limit). Never raises."""
    if len(line) > MAX_LINE or not line.startswith("{") or (
            '"api_retry"' not in line and '"rate_limit_event"' not in line):
        return None  # the cheap test first: most lines are messages
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if not isinstance(event, dict):
        return None
    wait: ProviderWait | None = None
    if event.get("type") == "system" and event.get("subtype") == "api_retry":
        delay = event.get("retry_delay_ms")
        kind = runend.BY_ERROR.get(str(event.get("error") or ""))
        if kind is None and event.get("error_status") == 429:
            kind = runend.RATE_LIMIT
        if isinstance(delay, int | float) and not isinstance(delay, bool) and delay > 0 \
                and kind == runend.RATE_LIMIT:
            wait = ProviderWait(now + timedelta(milliseconds=min(delay, 8 * 24 * 3600e3)),
                                kind)
    elif event.get("type") == "rate_limit_event":
        info = event.get("rate_limit_info")
        resets = info.get("resetsAt") if isinstance(info, dict) else None
        if (isinstance(info, dict) and info.get("status") == "rejected"
                and isinstance(resets, int) and not isinstance(resets, bool)):
            try:
                wait = ProviderWait(datetime.fromtimestamp(resets, UTC), runend.RATE_LIMIT)
            except (OverflowError, OSError, ValueError):
                return None
    if wait is None or wait.until - now < MIN_WAIT:
        return None
    return wait


class Seen:
    """The provider waits one run reported: each longer wait once (Claude Code
    says it again before each retry, and a wait may grow). The run's silence
    limit, if any, counts from the end of the wait: the host is silent while
    it waits."""

    def __init__(self, silence: Silence | None = None) -> None:
        self.until: datetime | None = None
        self.silence = silence

    def new(self, line: str, now: datetime) -> ProviderWait | None:
        wait = from_stream_line(line, now)
        if wait is None or (self.until is not None and wait.until <= self.until):
            return None
        self.until = wait.until
        if self.silence is not None:
            self.silence.waits_until((wait.until - now).total_seconds())
        return wait


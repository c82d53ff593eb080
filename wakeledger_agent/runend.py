"""A run's end as Wake Ledger may know it: the failure's class and its reset,
never the provider's text.

The hook reads the provider's message on this machine (with the pure
``ledger.domain`` classifier and reset parser, the server's own) and sends
the run-report endpoint a fixed phrase per class plus the reset as an
ISO 8601 ``retry_after``. The server classifies the phrase to the same class
and drops it, as it drops any error text; the provider's words never leave
the machine (docs/decisions.md, "Hooks send the class, not the text").
"""

from datetime import UTC, datetime, timedelta
from typing import Any

from ledger.domain.failures import (
    AUTH,
    OWNER_VERIFICATION,
    RATE_LIMIT,
    REQUEST_TOO_LARGE,
    UNCLASSIFIED,
    classify,
    usage_window,
)
from ledger.domain.resets import parse_reset

# What the server's classifier reads back as each class (tests/agent/test_claude_code_hooks.py
# checks the round trip through ``classify``).
PHRASES = {
    RATE_LIMIT: "rate limit",  # a per-minute request limit: the short backoff
    AUTH: "authentication failed",
    OWNER_VERIFICATION: "organization must be verified",
    REQUEST_TOO_LARGE: "request too large for the per-minute limit",
    UNCLASSIFIED: "unclassified failure",
}
# A rate limit whose text named a usage window: the server's usage-window backoff when no
# reset is stated (tests check ``usage_window`` reads each phrase back).
USAGE_PHRASE = "usage limit"
# Claude Code's StopFailure ``error`` values that decide the class on their own
# (its own reading of the API's answer, more reliable than its display text:
# "API Error: Request rejected (429)" names no rate limit in words).
BY_ERROR = {
    "rate_limit": RATE_LIMIT,
    "overloaded": RATE_LIMIT,
    "billing_error": RATE_LIMIT,  # a prepaid balance: topping up lifts it (docs/failures.md)
    "authentication_failed": AUTH,
    "oauth_org_not_allowed": AUTH,
    # Claude Code 2.1.332's newer values: each needs a human, none lifts by waiting.
    "cloud_credential_error": AUTH,  # Bedrock/Vertex credentials expired or refused
    "verification_required": OWNER_VERIFICATION,  # the account must be verified first
    "account_on_hold": OWNER_VERIFICATION,  # the account owner must settle the hold
}


def silent_phrase(limit: float) -> str:
    """What a run stopped for its silence is reported with: our words and the
    limit only, nothing the agent wrote. The server classifies it
    ``unclassified`` (a test checks it for every number, 429 and 401 too)."""
    return f"the agent produced no output for {limit:g} s; supervise stopped it"


def failure_class(error: str | None, text: str) -> str:
    """The class: Claude Code's own ``error`` when it decides one, else the text's."""
    decided = BY_ERROR.get(error or "")
    if decided == RATE_LIMIT and classify(text) == REQUEST_TOO_LARGE:
        return REQUEST_TOO_LARGE  # a 429 no wait lifts: the text is the more specific
    return decided or classify(text)


def run_report(error: str | None, text: str, *, now: datetime, tz: str = "UTC") -> dict[str, Any]:
    """The run-report body for a failed run: the class's phrase, and the reset
    the text states (a rate limit only), nothing of the text itself."""
    kind = failure_class(error, text)
    reset = parse_reset(text, now=now, tz=tz) if kind == RATE_LIMIT else None
    if reset is not None and reset.microsecond:
        # To the second, rounded up: waking a moment early would only meet the limit again.
        reset = reset.replace(microsecond=0) + timedelta(seconds=1)
    phrase = USAGE_PHRASE if kind == RATE_LIMIT and usage_window(text) else PHRASES[kind]
    return {"outcome": "error", "error_text": phrase,
            "retry_after": reset.isoformat() if reset else ""}


def note_report(note: str, error: str | None, text: str, *, now: datetime,
                tz: str = "UTC") -> dict[str, Any]:
    """The run-report body of a failure the run went on through (``note``, one
    of ``ledger.domain.runs.NOTES``): its class and reset as ``run_report``
    reads them, recorded on the goal without a pause."""
    return {**run_report(error, text, now=now, tz=tz), "outcome": "note", "note": note}


def wait_report(error_class: str, until: datetime) -> dict[str, Any]:
    """The run-report body of a provider wait inside the host's own retry: the
    class's phrase and the reset, a note (``provider_wait``) that shows on
    the goal while it lasts."""
    return {"outcome": "note", "note": "provider_wait", "error_text": PHRASES[error_class],
            "retry_after": until.astimezone(UTC).isoformat()}

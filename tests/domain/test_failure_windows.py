"""Reading how a run ended, for every host. A per-minute request limit told
from a usage window (the backoff when no reset is stated), a terminal's hard line
breaks (even inside a word or a number) undone, and the properties that hold whatever
the text: wrapping a known notice anywhere keeps its class, and a reset read from any
text lies within ``[now, now + RESET_HORIZON]``. Pure domain: plain pytest."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.domain.failures import (
    AUTH,
    RATE_LIMIT,
    REQUEST_TOO_LARGE,
    UNCLASSIFIED,
    classify,
    unwrapped,
    usage_window,
)
from ledger.domain.resets import RESET_HORIZON, parse_reset, stated_reset
from ledger.domain.runs import REQUEST_BACKOFF_MAX, backoff, request_backoff

NOW = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)  # 12:00 in Istanbul

# (text, its class, a usage window?) — each from a public page (tests/domain/test_failures.py
# names the sources) or a provider's documented wording.
NOTICES = [
    # Claude Code's API-key 429: a per-minute limit, no reset.
    ("API Error: Request rejected (429) · try again later", RATE_LIMIT, False),
    # Codex's 429 with no reset in its text (the reset only in a header), openai/codex#10550.
    ("exceeded retry limit, last status: 429 Too Many Requests, request id: "
     "9c84b52ce87fbe62-SJC", RATE_LIMIT, False),
    # Anthropic's server throttling, anthropics/claude-code#62527.
    ("API Error: Server is temporarily limiting requests (not your usage limit) · Rate "
     "limited", RATE_LIMIT, False),
    # Anthropic API, tests/domain/test_failures.py's row.
    ("Error: 429 {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":"
     "\"This request would exceed your account's rate limit. Please try again later.\"}}",
     RATE_LIMIT, False),
    # OpenAI's per-minute tokens, openai/openai-python.
    ("Rate limit reached for gpt-4 in organization org-x on tokens per min (TPM): Limit "
     "10000, Used 8554, Requested 3082.", RATE_LIMIT, False),
    # Claude Code's usage windows.
    ("You've hit your limit · resets 3am (Europe/Istanbul)", RATE_LIMIT, True),
    ("5-hour limit reached ∙ resets 3am", RATE_LIMIT, True),
    # Codex's usage limit without a time (the reset only in a header).
    ("You've hit your usage limit. Upgrade to Pro or try again later.", RATE_LIMIT, True),
    # OpenAI's insufficient_quota: a balance, waited out long.
    ("You exceeded your current quota, please check your plan and billing details.",
     RATE_LIMIT, True),
    # Codex, openai/codex#6498.
    ("Your access token could not be refreshed because your refresh token was already "
     "used. Please log out and sign in again.", AUTH, False),
    # openai/codex#38366.
    ("Request too large for gpt-5.6-luna in organization org-b on tokens per min (TPM): "
     "Limit 200000, Requested 208334. The input or output tokens must be reduced in order "
     "to run successfully.", REQUEST_TOO_LARGE, False),
]


@pytest.mark.parametrize(("text", "kind", "window"), NOTICES)
def test_each_notice_has_its_class_and_window(text, kind, window):
    assert classify(text) == kind
    if kind == RATE_LIMIT:
        assert usage_window(text) is window


def test_the_backoffs_without_a_reset():
    """A per-minute limit: a short backoff, growing per consecutive failure, bounded;
    a usage window: the 30 min one, doubling to a day."""
    assert [request_backoff(n).total_seconds() for n in range(7)] == \
        [60, 120, 240, 480, 900, 900, 900]
    assert request_backoff(10_000) == REQUEST_BACKOFF_MAX
    assert backoff(0) == timedelta(minutes=30)


def wrap(text: str, position: int, indent: int) -> str:
    """A terminal's hard wrap: a line break and its indentation, at any position."""
    return text[:position] + "\n" + " " * indent + text[position:]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(NOTICES), st.data(), st.integers(0, 8))
def test_a_wrapped_notice_keeps_its_class_and_window(notice, data, indent):
    text, kind, window = notice
    position = data.draw(st.integers(0, len(text)))
    wrapped = wrap(text, position, indent)
    # Undone exactly, unless the break stood before a space (the join eats it too).
    assert unwrapped(wrapped) == text or text[position] == " "
    assert classify(wrapped) == kind
    if kind == RATE_LIMIT:
        assert usage_window(wrapped) is window


RESETS = [
    ("You've hit your limit · resets 3am (Europe/Istanbul)", datetime(2026, 12, 3, 0, 0,
                                                                      tzinfo=UTC)),
    ("You've hit your usage limit. Upgrade to Pro or try again at 6:44 PM.",
     datetime(2026, 12, 2, 18, 44, tzinfo=UTC)),
    ("Rate limit reached for gpt-4o. Please try again in 9.816s.",
     NOW + timedelta(seconds=9.816)),
]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(RESETS), st.data(), st.integers(0, 8))
def test_a_reset_wrapped_anywhere_reads_the_same(case, data, indent):
    """Even inside a number ("6:4\\n 4 PM") or a zone ("Europe/Ist\\n anbul")."""
    text, expected = case
    position = data.draw(st.integers(0, len(text)))
    assert stated_reset(wrap(text, position, indent), now=NOW) == expected


def test_a_wrap_inside_the_zone_name_is_no_longer_misread():
    text = "You've hit your limit · resets 3am (Europe/Ist\n     anbul)"
    assert stated_reset(text, now=NOW) == datetime(2026, 12, 3, 0, 0, tzinfo=UTC)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200), st.datetimes(min_value=datetime(2000, 1, 1),
                                           max_value=datetime(2200, 1, 1)))
def test_a_reset_read_from_any_text_is_never_past_nor_beyond_the_horizon(text, now):
    now = now.replace(tzinfo=UTC)
    for candidate in (text, text + " resets 3am", "try again in " + text,
                      wrap("resets 3am (Europe/Istanbul) " + text, len(text) // 2, 3)):
        reset = parse_reset(candidate, now=now)
        assert reset is None or now <= reset <= now + RESET_HORIZON
        assert classify(candidate) in (RATE_LIMIT, AUTH, REQUEST_TOO_LARGE, UNCLASSIFIED,
                                       "owner_verification")

"""Failure texts as providers really print them: their class, and the instant they name.

Every row names where its text comes from: the product that prints it and the public page
(mostly GitHub issues quoting the message verbatim) where it was found. Expected instants
are worked out by hand and written as literals; they never come from the code under test.
A row's instant is the reset as stated (``stated_reset``); what a scheduler gets
(``parse_reset``) is that instant clamped to ``[now, now + RESET_HORIZON]``.
Where an issue's title carries Claude Code's raw epoch ("…|1749924000"), the row's
expectation is checked against that epoch too. No database: plain pytest.
"""

from datetime import UTC, datetime, timedelta, timezone
from email.utils import format_datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.domain.failures import (
    AUTH,
    CLASSES,
    OWNER_VERIFICATION,
    RATE_LIMIT,
    REQUEST_TOO_LARGE,
    UNCLASSIFIED,
    classify,
)
from ledger.domain.resets import (
    RESET_HORIZON,
    parse_reset,
    parse_retry_after,
    stated_reset,
)

NOW = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)  # 04:00 in New York, 10:00 in Paris


def at(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


# (text, retry_after, tz, now, expected UTC instant or None)
RESETS = [
    # --- Claude Code / claude.ai usage limits ------------------------------------------
    # Claude Code 1.x, anthropics/claude-code#9236; the terminal wrapped the line, and
    # America/Santiago is UTC-3 in December (Chilean summer time).
    (
        "Claude usage limit reached. Your limit will reset \n     at 3pm (America/Santiago).",
        None,
        "UTC",
        NOW,
        at(2026, 12, 2, 18, 0),
    ),
    # Claude Code 1.0.24, anthropics/claude-code#2087 (title "…|1749924000"): Etc/GMT+5
    # is UTC-5 (POSIX sign), so 1pm there is 18:00Z. `now` is the log timestamp.
    (
        "Claude usage limit reached. Your limit will reset at 1pm (Etc/GMT+5).",
        None,
        "UTC",
        at(2025, 6, 14, 17, 56, 6),
        at(2025, 6, 14, 18, 0),  # == 1749924000
    ),
    # Claude Code 1.0.58, anthropics/claude-code#15064 (title "…|1766502000"): read at
    # 09:32 Chicago, 9am has passed, so the next 9am is tomorrow's.
    (
        "⎿  Claude usage limit reached. Your limit will reset at 9am (America/Chicago).",
        None,
        "UTC",
        at(2025, 12, 22, 15, 32, 14),
        at(2025, 12, 23, 15, 0),  # == 1766502000
    ),
    # Claude Code 1.0.84, anthropics/claude-code#6119 (title "…|1755615600"), CEST.
    (
        "Claude usage limit reached. Your limit will reset at 5pm (Europe/Warsaw).",
        None,
        "UTC",
        at(2025, 8, 19, 14, 8, 25),
        at(2025, 8, 19, 15, 0),  # == 1755615600
    ),
    # Claude Code's raw form, anthropics/claude-code#9046 title: epoch seconds after a
    # pipe. It is in the past at NOW: stated as it is; parse_reset answers NOW.
    ("Claude AI usage limit reached|1760000400", None, "UTC", NOW, at(2025, 10, 9, 9, 0)),
    # Claude Code 2.1.30, anthropics/claude-code#22946 title.
    (
        "You've hit your limit · resets 10pm (America/New_York)",
        None,
        "UTC",
        NOW,
        at(2026, 12, 3, 3, 0),
    ),
    # Claude Code 2.1.201, anthropics/claude-code#74079 title: 12:50am is just past 00:50,
    # which at NOW (01:00 in Los Angeles) has passed: tomorrow's.
    (
        "You've hit your session limit · resets 12:50am (America/Los_Angeles)",
        None,
        "UTC",
        NOW,
        at(2026, 12, 3, 8, 50),
    ),
    # Claude Code 2.0.51, anthropics/claude-code#12308 title: Auckland is UTC+13 (NZDT);
    # NOW is 22:00 there, so 2pm is tomorrow's.
    (
        "5-hour limit reached · resets 2pm (Pacific/Auckland) · /upgrade to Max 20x or turn "
        "on /extra-usage",
        None,
        "UTC",
        NOW,
        at(2026, 12, 3, 1, 0),
    ),
    # Claude Code 2.0.55, anthropics/claude-code#12686 title: a month-day without a year
    # that is today (Moscow, UTC+3, 12:00 at NOW) and a time still ahead.
    (
        "Weekly limit reached · resets Dec 2, 7pm (Europe/Moscow) ·",
        None,
        "UTC",
        NOW,
        at(2026, 12, 2, 16, 0),
    ),
    # Claude Code 2.0.76 /usage panel, anthropics/claude-code#16618: Jan 12 is past in
    # 2026's calendar as of December, so it rolls into 2027.
    (
        " Current week (Sonnet only)\n Resets Jan 12, 10:59am (America/New_York)",
        None,
        "UTC",
        NOW,
        at(2027, 1, 12, 15, 59),
    ),
    # Claude Code 2.1.163, anthropics/claude-code#65802 title: next June 7th, CEST.
    (
        "You've hit your weekly limit · resets Jun 7, 4pm (Europe/Rome)",
        None,
        "UTC",
        NOW,
        at(2027, 6, 7, 14, 0),
    ),
    # Claude Code 2.1.263, anthropics/claude-code#92834 title ("Sep 15 at 7pm", the zone
    # redacted by its author): no zone in the text, so the agent's tz is used.
    (
        "You've hit your weekly limit · resets Sep 15 at 7pm",
        None,
        "Europe/Berlin",
        NOW,
        at(2027, 9, 15, 17, 0),
    ),
    # Claude Code, quoted in benbasha/Claude-Autopilot#25 ("Now the date limit format
    # is: …"), agent in UTC: 1am has passed at 09:00.
    ("5-hour limit reached ∙ resets 1am", None, "UTC", NOW, at(2026, 12, 3, 1, 0)),
    # Claude Code, quoted in aniketkarne/CCAutoRenew#3: 12am is midnight, the next one.
    (
        'I often see this message "Claude usage limit reached. Your limit will reset at 12am."',
        None,
        "Asia/Tokyo",
        NOW,
        at(2026, 12, 2, 15, 0),
    ),
    # Claude Code 1.0.31 /model line, quoted in anthropics/claude-code#1450: 12pm is noon.
    (
        "L Default Opus 4 for up to 50% of usage limits, then use Sonnet 4 (currently Sonnet "
        "· Resets at 12pm)",
        None,
        "America/New_York",
        NOW,
        at(2026, 12, 2, 17, 0),
    ),
    # anthropics/claude-code#11429: the reporter quotes "reset at 6:30pm IST"; the title's
    # epoch 1762952400 is 13:00Z, i.e. 18:30 in India. "IST" is ambiguous (India, Israel,
    # Ireland) and ignored: the agent's tz reads the time.
    (
        "it said it will reset at 6:30pm IST",
        None,
        "Asia/Kolkata",
        at(2025, 11, 11, 16, 40, 6),
        at(2025, 11, 12, 13, 0),  # == 1762952400
    ),
    # The midnight-rollover trap found in review of melodic-software/claude-code-plugins
    # PR #2462: "resets 2:30am (America/New_York)" read at 23:00 EDT is tomorrow's 2:30am.
    (
        "resets 2:30am (America/New_York)",
        None,
        "UTC",
        at(2026, 7, 25, 3, 0),  # 23:00 EDT on Jul 24
        at(2026, 7, 25, 6, 30),
    ),
    # Claude Code /usage, anthropics/claude-code#52334: two resets listed; the later one
    # (the week's) is the safe wake.
    (
        "Current session\nResets 3:20pm (Europe/Berlin)\n\nCurrent week (all models)\n"
        "Resets 10pm (Europe/Berlin)",
        None,
        "UTC",
        NOW,
        at(2026, 12, 2, 21, 0),
    ),
    # Claude Code's format (anthropics/claude-code#22946, above) with an invented zone:
    # an unknown name falls back to the agent's tz (Paris, 10:00 CET at NOW)…
    (
        "You've hit your limit · resets 3pm (Mars/Olympus)",
        None,
        "Europe/Paris",
        NOW,
        at(2026, 12, 2, 14, 0),
    ),
    # …and when the agent's tz is unknown too, to UTC.
    (
        "You've hit your limit · resets 3pm (Mars/Olympus)",
        None,
        "Not/AZone",
        NOW,
        at(2026, 12, 2, 15, 0),
    ),
    # Claude Code's format with a fixed-offset IANA zone: Etc/GMT-3 is UTC+3 (POSIX).
    ("usage limit reached, resets 8am (Etc/GMT-3)", None, "UTC", NOW, at(2026, 12, 3, 5, 0)),
    # The task's example, Claude Code format with Europe/Istanbul (UTC+3, no DST).
    (
        "usage limit reached, resets 8am (Europe/Istanbul)",
        None,
        "UTC",
        NOW,
        at(2026, 12, 3, 5, 0),
    ),
    # --- Anthropic API ------------------------------------------------------------------
    # Claude Code 2.1.81 error log, anthropics/claude-code#38035: an absolute date; the
    # log line's own "timestamp" is no reset and must not be read as one.
    (
        '[{"error":"Error: 400 {\\"type\\":\\"error\\",\\"error\\":{\\"type\\":'
        '\\"invalid_request_error\\",\\"message\\":\\"You have reached your specified API '
        'usage limits. You will regain access on 2026-04-01 at 00:00 UTC.\\"}}",'
        '"timestamp":"2026-03-23T23:08:46.305Z"}]',
        None,
        "UTC",
        at(2026, 3, 23, 23, 8, 46),
        at(2026, 4, 1, 0, 0),
    ),
    # Claude Code 1.0.83 error log, anthropics/claude-code#11429: a 429 that names no
    # reset; its "timestamp" is not one either.
    (
        '[{"error":"Error: 429 {\\"type\\":\\"error\\",\\"error\\":{\\"type\\":'
        '\\"rate_limit_error\\",\\"message\\":\\"This request would exceed your account\'s '
        'rate limit. Please try again later.\\"}}","timestamp":"2025-11-11T16:40:06.075Z"}]',
        None,
        "UTC",
        NOW,
        None,
    ),
    # Claude Code, anthropics/claude-code#7218: "Retrying in 4 seconds" is the client's
    # own backoff, not a reset the provider named.
    (
        'API Error (529 {"type":"error","error":{"type":"overloaded_error","message":'
        '"Overloaded"},"request_id":null}) · Retrying in 4 seconds… (attempt 4/10)',
        None,
        "UTC",
        NOW,
        None,
    ),
    # Claude Code 2.1.195, anthropics/claude-code#72390: "in a moment" is no instant.
    (
        "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try "
        "again in a moment. If it persists, check https://status.claude.com.",
        None,
        "UTC",
        NOW,
        None,
    ),
    # Anthropic rate-limit headers as printed in the Claude API guide mirrored at
    # git.waymay.us (jezweb claude-skills, references/rate-limits.md), dates moved to
    # 2026: window headers only, so the later window is the wake.
    (
        "anthropic-ratelimit-requests-limit: 50\nanthropic-ratelimit-requests-remaining: 0\n"
        "anthropic-ratelimit-requests-reset: 2026-12-02T12:00:00Z\n"
        "anthropic-ratelimit-tokens-limit: 50000\nanthropic-ratelimit-tokens-remaining: 49500\n"
        "anthropic-ratelimit-tokens-reset: 2026-12-02T12:01:00Z",
        None,
        "UTC",
        NOW,
        at(2026, 12, 2, 12, 1),
    ),
    # Same guide, "On 429 errors: retry-after: 60": the 429's own delay beats the window
    # headers sent with every response.
    (
        "HTTP/1.1 429 Too Many Requests\nretry-after: 60\n"
        "anthropic-ratelimit-tokens-reset: 2026-12-02T12:01:00Z",
        None,
        "UTC",
        NOW,
        at(2026, 12, 2, 9, 1),
    ),
    # --- OpenAI API ---------------------------------------------------------------------
    # OpenAI API 429, quoted in FoundationAgents/MetaGPT#523: fractional seconds.
    (
        "openai.error.RateLimitError: Rate limit reached for gpt-4 in organization "
        "org-uVqpjtJiKqvVJMVfvpaounIh on tokens per min (TPM): Limit 10000, Used 8554, "
        "Requested 3082. Please try again in 9.816s. Visit "
        "https://platform.openai.com/account/rate-limits to learn more.",
        None,
        "UTC",
        NOW,
        datetime(2026, 12, 2, 9, 0, 9, 816000, tzinfo=UTC),
    ),
    # OpenAI API 429, BuilderIO/micro-agent#86: milliseconds.
    (
        "429 Rate limit reached for gpt-4o in organization org-uOtiSEwvUnroadaOnJJquBEC on "
        "tokens per min (TPM): Limit 30000, Used 29937, Requested 385. Please try again in "
        "644ms.",
        None,
        "UTC",
        NOW,
        datetime(2026, 12, 2, 9, 0, 0, 644000, tzinfo=UTC),
    ),
    # Older OpenAI wording, jorge-menjivar/unsaged#53.
    (
        "Rate limit reached for gpt-4 in organization ***** on tokens per min. Limit: 10000 / "
        "min. Please try again in 6ms.",
        None,
        "UTC",
        NOW,
        datetime(2026, 12, 2, 9, 0, 0, 6000, tzinfo=UTC),
    ),
    # OpenAI's rate-limit guide, header sample (docs history at spybara.com): Go-style
    # durations; both windows, so the later one.
    (
        "x-ratelimit-limit-requests: 60\nx-ratelimit-remaining-requests: 59\n"
        "x-ratelimit-reset-requests: 1s\nx-ratelimit-reset-tokens: 6m0s",
        None,
        "UTC",
        NOW,
        at(2026, 12, 2, 9, 6, 0),
    ),
    # OpenAI response headers pasted in community.openai.com/t/…/1268905.
    (
        "x-ratelimit-reset-requests: 12ms\nx-ratelimit-reset-tokens: 9ms\n"
        "x-ratelimit-reset-tokens_usage_based: 9ms",
        None,
        "UTC",
        NOW,
        datetime(2026, 12, 2, 9, 0, 0, 12000, tzinfo=UTC),
    ),
    # --- OpenAI Codex -------------------------------------------------------------------
    # Codex CLI 0.39.0, openai/codex#3899: wrapped over two lines by the terminal.
    (
        "■ You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) "
        "or try again in 5 days 22 hours 11\nminutes.",
        None,
        "UTC",
        NOW,
        at(2026, 12, 8, 7, 11),
    ),
    # Codex CLI 0.27.0, openai/codex#3031.
    (
        "🖐  You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) "
        "or try again in 3 hours 2 minutes.",
        None,
        "UTC",
        NOW,
        at(2026, 12, 2, 12, 2),
    ),
    # Codex app, openai/codex#21047: ordinal day, 12-hour clock, read in the agent's tz
    # (CEST), `now` the week of the issue.
    (
        "You've hit your usage limit. Upgrade to Plus to continue using Codex "
        "(https://chatgpt.com/explore/plus), or try again at May 11th, 2026 1:36 PM.",
        None,
        "Europe/Madrid",
        at(2026, 5, 4, 10, 0),
        at(2026, 5, 11, 11, 36),
    ),
    # Codex app, openai/codex#39603: a date already past at NOW (parse_reset: NOW).
    (
        "You've hit your usage limit... or try again at Aug 20, 2026, 7:38 AM",
        None,
        "America/Los_Angeles",
        NOW,
        at(2026, 8, 20, 14, 38),
    ),
    # Codex Desktop, openai/codex#41689: "after" a date (not a delay), 24-hour clock.
    (
        "You have reached the usage limit. Upgrade or add credits to continue, or try again "
        "after September 6, 2026, 11:15.",
        None,
        "Asia/Shanghai",
        at(2026, 8, 30, 0, 0),
        at(2026, 9, 6, 3, 15),
    ),
    # Codex app, openai/codex#26197 (reporter in Tehran, UTC+3:30, 20:06 local).
    (
        "You\u2019re out of Codex messages\nYour rate limit resets on Jul 3, 2026, 11:43 AM. To "
        "continue using Codex, upgrade to Plus today.",
        None,
        "Asia/Tehran",
        at(2026, 6, 3, 16, 36),
        at(2026, 7, 3, 8, 13),
    ),
    # Codex CLI, promptdriven/pdd#2175 (the "Jul 23rd" envelope that project had to add).
    (
        "You have hit your usage limit. Visit https://chatgpt.com/codex/settings/usage to "
        "purchase more credits or try again at Jul 23rd, 2026 4:15 AM.",
        None,
        "UTC",
        at(2026, 7, 17, 0, 0),
        at(2026, 7, 23, 4, 15),
    ),
    # Codex CLI 0.46.0 /status, openai/codex#5115: a 24-hour time without a date.
    ("5h limit: [██████] 100% used (resets 12:55)", None, "UTC", NOW, at(2026, 12, 2, 12, 55)),
    # Codex app in Portuguese, openai/codex#28089: not understood, and "10" must not be
    # misread as 10 o'clock.
    (
        "You've hit your usage limit. Upgrade your plan to continue, or try again at 10 de "
        "jul. de 2026, 11:52.",
        None,
        "UTC",
        NOW,
        None,
    ),
    # Codex CLI 0.23.0, openai/codex#2669: "reset (every 5h and every week.)" names no time.
    (
        "🖐 You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing), "
        "or wait for limits to reset (every 5h and every week.).",
        None,
        "UTC",
        NOW,
        None,
    ),
    # Codex backend JSON with its headers, earendil-works/pi#4172: resets_at (the 5-hour
    # window that was hit) beats the relative resets_in_seconds and the weekly
    # X-Codex-Secondary-Reset-At (80% used, not the limit that was hit).
    (
        'Error: Codex error: {"type":"error","error":{"type":"usage_limit_reached","message":'
        '"The usage limit has been reached","plan_type":"plus","resets_at":1777936568,'
        '"eligible_promo":null,"resets_in_seconds":13872},"status_code":429,"headers":'
        '{"X-Codex-Primary-Used-Percent":"100","X-Codex-Secondary-Used-Percent":"80",'
        '"X-Codex-Primary-Reset-At":"1777936568","X-Codex-Secondary-Reset-At":"1778239400"}}',
        None,
        "UTC",
        at(2026, 5, 4, 19, 25, 0),
        at(2026, 5, 4, 23, 16, 8),  # == 1777936568
    ),
    # Codex backend body, james-6-23/codex2api#9.
    (
        '{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached",'
        '"plan_type":"free","resets_at":1775317531,"resets_in_seconds":602705}}',
        None,
        "UTC",
        at(2026, 3, 28, 0, 0),
        at(2026, 4, 4, 15, 45, 31),  # == 1775317531
    ),
    # Codex rate-limit info as a TypeScript client stores it (resetsAt "unix ms since
    # epoch", interface OpenAiCodexRateLimitInfo found in the code corpus): 13 digits.
    (
        '{"primary":{"usedPercent":100,"windowMinutes":300,"resetsAt":1796216400000}}',
        None,
        "UTC",
        NOW,
        at(2026, 12, 2, 13, 0),
    ),
    # --- Gemini ---------------------------------------------------------------------------
    # Gemini API 429 via Roo Code, RooCodeInc/Roo-Code#3883: RetryInfo inside JSON that is
    # itself an escaped string.
    (
        '"details": [\\n      {\\n        \\"@type\\": \\"type.googleapis.com/google.rpc.'
        'RetryInfo\\",\\n        \\"retryDelay\\": \\"26s\\"\\n      }\\n    ]',
        None,
        "UTC",
        NOW,
        at(2026, 12, 2, 9, 0, 26),
    ),
    # Gemini API 429 as quoted in googleapis/python-genai PR #2114: the message's precise
    # "retry in" and RetryInfo's rounded "58s"; the later one, rounded up to the µs.
    (
        "[429 RESOURCE_EXHAUSTED. {'error': {'code': 429, 'message': 'You exceeded [...] "
        "Please retry in 58.934310785s.', 'status': 'RESOURCE_EXHAUSTED', 'details': [{'@type':"
        " 'type.googleapis.com/google.rpc.RetryInfo', 'retryDelay': '58s'}]}}.)",
        None,
        "UTC",
        NOW,
        datetime(2026, 12, 2, 9, 0, 58, 934311, tzinfo=UTC),
    ),
    # Gemini API RetryInfo, letterstory/lettertrace PR #34.
    (
        '{"error":{"code":429,"status":"RESOURCE_EXHAUSTED",\n  "details":[{"@type":'
        '"…/google.rpc.RetryInfo","retryDelay":"38s"}]}}',
        None,
        "UTC",
        NOW,
        at(2026, 12, 2, 9, 0, 38),
    ),
    # Gemini CLI via Cloud Code Assist, earendil-works/pi#2851: a Go duration.
    (
        "Cloud Code Assist API error (429): You have exhausted your capacity on this model. "
        "Your quota will reset after 12h34m16s.",
        None,
        "UTC",
        NOW,
        at(2026, 12, 2, 21, 34, 16),
    ),
    # --- HTTP headers and other services -------------------------------------------------
    # Retry-After delta-seconds, MDN's example "Retry-After: 120".
    ("", "120", "UTC", NOW, at(2026, 12, 2, 9, 2)),
    # Retry-After HTTP-date, MDN's example verbatim (2015): past (parse_reset: NOW).
    ("", "Wed, 21 Oct 2015 07:28:00 GMT", "UTC", NOW, at(2015, 10, 21, 7, 28)),
    # Retry-After with a fraction: not RFC 9110, tolerated.
    ("", "1.5", "UTC", NOW, datetime(2026, 12, 2, 9, 0, 1, 500000, tzinfo=UTC)),
    # A valid Retry-After header beats the body (the MetaGPT#523 wording).
    ("Please try again in 9.816s.", "30", "UTC", NOW, at(2026, 12, 2, 9, 0, 30)),
    # An invalid one is ignored, not fatal: the body decides (micro-agent#86 wording).
    (
        "Please try again in 644ms.",
        "soon",
        "UTC",
        NOW,
        datetime(2026, 12, 2, 9, 0, 0, 644000, tzinfo=UTC),
    ),
    # GitHub REST API (docs.github.com, "Rate limits for the REST API": x-ratelimit-reset
    # "is in UTC epoch seconds").
    (
        "HTTP/2 403\nx-ratelimit-limit: 60\nx-ratelimit-remaining: 0\nx-ratelimit-reset: "
        "1796216400",
        None,
        "UTC",
        NOW,
        at(2026, 12, 2, 13, 0),
    ),
    # GitLab's rate-limit headers (docs, user_and_ip_rate_limits.md): epoch and HTTP-date
    # forms of one window; past at NOW (parse_reset: NOW).
    (
        "RateLimit-Remaining: 0\nRateLimit-Reset: 1609844400\n"
        "RateLimit-ResetTime: Tue, 05 Jan 2021 11:00:00 GMT",
        None,
        "UTC",
        NOW,
        at(2021, 1, 5, 11, 0),
    ),
    # lemlist API docs (developer.lemlist.com, "rate limits"): a JSON dump of headers whose
    # X-RateLimit-Reset is a JavaScript Date string with a written offset (GMT+0100)…
    (
        '{"X-RateLimit-Limit": 20, "X-RateLimit-Remaining": 0, "X-RateLimit-Reset": '
        '"Tue Feb 16 2021 09:02:42 GMT+0100 (Central European Standard Time)"}',
        None,
        "UTC",
        NOW,
        at(2021, 2, 16, 8, 2, 42),
    ),
    # …and, as printed there, with "Retry-After": 2, which beats the window header.
    (
        '{"Retry-After": 2, "X-RateLimit-Limit": 20, "X-RateLimit-Remaining": 7, '
        '"X-RateLimit-Reset": "Tue Feb 16 2021 09:02:42 GMT+0100 (Central European Standard '
        'Time)"}',
        None,
        "UTC",
        NOW,
        at(2026, 12, 2, 9, 0, 2),
    ),
    # The bug fixed in crunchtools/mcp-github v1.3.1: GitHub's epoch printed as a delay.
    # A delay of 56 years is a misread, not a reset.
    ("Retry after 1792152901 seconds", None, "UTC", NOW, None),
    # GitHub Desktop/app wording, github/app#3803.
    ("I'm getting Limit reached error resets in 1 hour", None, "UTC", NOW, at(2026, 12, 2, 10, 0)),
    # Kiro CLI /usage, kirodotdev/Kiro#7005: a date alone is its midnight in the agent's
    # tz (Pakistan, UTC+5).
    (
        "Estimated Usage | resets on 2026-04-01 | KIRO FREE",
        None,
        "Asia/Karachi",
        at(2026, 3, 31, 12, 0),
        at(2026, 3, 31, 19, 0),
    ),
    # Formats the task names, for which no verbatim sample turned up in the corpus: an
    # ISO date with a zone word, and a written "GMT+3" (UTC+3, unlike Etc/GMT+3) whose
    # month-day is past this year.
    ("Retry after 2026-12-03 00:00 UTC", None, "UTC", NOW, at(2026, 12, 3, 0, 0)),
    ("try again at Oct 19 at 8:39 AM GMT+3", None, "UTC", NOW, at(2027, 10, 19, 5, 39)),
    ("resets in 2h 30m", None, "UTC", NOW, at(2026, 12, 2, 11, 30)),
    # --- Added in the usage-limit review (docs/failures.md): paid extra usage, session and weekly
    # windows, overload and capacity notices, more providers --------------------------
    # Claude Code 2.1.23, anthropics/claude-code#22603 title (paid extra usage, a dated
    # reset); `now` is the log timestamp, Budapest is UTC+1 in February.
    (
        "You're out of extra usage · resets Feb 4, 8pm (Europe/Budapest)",
        None,
        "UTC",
        at(2026, 2, 2, 19, 49, 25),
        at(2026, 2, 4, 19, 0),
    ),
    # Claude Code, anthropics/claude-code#29741: the refusal, and the /usage panel's extra
    # usage line; at NOW (01:00 in Los Angeles) 10pm is today's, 12am tomorrow's.
    (
        "You're out of extra usage · resets 10pm (America/Los_Angeles)",
        None,
        "UTC",
        NOW,
        at(2026, 12, 3, 6, 0),
    ),
    (
        "Extra usage\n  77% used\n  $15.40 / $20.00 spent · Resets 12am (America/Los_Angeles)",
        None,
        "UTC",
        NOW,
        at(2026, 12, 3, 8, 0),
    ),
    # Claude Code 2.1.114, anthropics/claude-code#55876 title ("May 5 at 9pm", EDT); `now`
    # is the log timestamp.
    (
        "You've hit your limit · resets May 5 at 9pm (America/New_York)",
        None,
        "UTC",
        at(2026, 5, 3, 20, 54, 34),
        at(2026, 5, 6, 1, 0),
    ),
    # Codex CLI, openai/codex#3124 (a weekly window: days, hours, minutes).
    (
        "You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or "
        "try again in 2 days 17 hours 14 minutes.",
        None,
        "UTC",
        NOW,
        at(2026, 12, 5, 2, 14),
    ),
    # Codex CLI, openai/codex#3257 title.
    (
        "You've hit your usage limit. Try again in 4 days 20 hours 9 minutes.",
        None,
        "UTC",
        NOW,
        at(2026, 12, 7, 5, 9),
    ),
    # Codex app, openai/codex#26668 (a Plus trial's monthly window): stated a month ahead,
    # so parse_reset answers the horizon (2026-06-12 00:00Z).
    (
        "You've hit your usage limit. Upgrade to Plus to continue using Codex "
        "(https://chatgpt.com/explore/plus), or try again at Jul 5th, 2026 8:19 PM.",
        None,
        "UTC",
        at(2026, 6, 5, 0, 0),
        at(2026, 7, 5, 20, 19),
    ),
    # Azure OpenAI, microsoft/action-python#12: "exceeded call rate limit … retry after".
    (
        "error_code=429 error_message='Requests to the Creates a completion for the chat "
        "message Operation under Azure OpenAI API version 2023-03-15-preview have exceeded "
        "call rate limit of your current OpenAI S0 pricing tier. Please retry after 3 "
        "seconds. Please go here: https://aka.ms/oai/quotaincrease if you would like to "
        "further increase the default rate limit.'",
        None,
        "UTC",
        NOW,
        at(2026, 12, 2, 9, 0, 3),
    ),
    # Azure OpenAI token rate limit, jasonacox/TinyLLM#17: a day.
    (
        "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version "
        "2023-05-15 have exceeded token rate limit of your current AIServices S0 pricing "
        "tier. Please retry after 86400 seconds.",
        None,
        "UTC",
        NOW,
        at(2026, 12, 3, 9, 0),
    ),
    # Azure OpenAI at peak load (a capacity notice, not the caller's quota), via
    # pollinations/pollinations#6260.
    (
        "azure-openai error: The system is currently experiencing high demand and cannot "
        "process your request. Your request exceeds the maximum usage size allowed during "
        "peak load. Please retry after 20 seconds.",
        None,
        "UTC",
        NOW,
        at(2026, 12, 2, 9, 0, 20),
    ),
    # Azure OpenAI through Teams AI, microsoft/copilot-camp#551.
    (
        'Server responded with status 429. Error message: {"error":{"code":"429","message": '
        '"Rate limit is exceeded. Try again in 2 seconds."}}',
        None,
        "UTC",
        NOW,
        at(2026, 12, 2, 9, 0, 2),
    ),
    # Groq, tokens per day, continuedev/continue#10920: a Go duration with minutes.
    (
        "429 Rate limit reached for model `llama-3.3-70b-versatile` in organization "
        "`org_01kjh7p9n8f1qs6nz2bz77vy6b` service tier `on_demand` on tokens per day (TPD): "
        "Limit 100000, Used 97050, Requested 3619. Please try again in 9m38.016s.",
        None,
        "UTC",
        NOW,
        datetime(2026, 12, 2, 9, 9, 38, 16000, tzinfo=UTC),
    ),
    # Groq, bklieger-groq/stockbot-on-groq#46: four decimals of seconds.
    (
        "Last error: Rate limit reached for model `llama3-70b-8192` in organization "
        "`org_01hqm053avffh8w60ayqm1kr4a` on : Limit 500000, Used 500370, Requested 252. "
        "Please try again in 1m47.5854s.",
        None,
        "UTC",
        NOW,
        datetime(2026, 12, 2, 9, 1, 47, 585400, tzinfo=UTC),
    ),
    # Gemini API free tier, diegosouzapw/OmniRoute#9504: a per-day quota whose message and
    # RetryInfo both name a delay; the message's precise one is later.
    (
        '"message": "You exceeded your current quota, please check your plan and billing '
        "details. \\n* Quota exceeded for metric: generativelanguage.googleapis.com/"
        "generate_content_free_tier_requests, limit: 20, model: gemini-3.6-flash\\nPlease "
        'retry in 36.429760048s.", "status": "RESOURCE_EXHAUSTED", "details": [{ "@type": '
        '"type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "36s" }]',
        None,
        "UTC",
        NOW,
        datetime(2026, 12, 2, 9, 0, 36, 429761, tzinfo=UTC),
    ),
    # GitHub Copilot CLI 1.0.25, github/copilot-cli#2696.
    (
        "✗ Sorry, you've hit a rate limit that restricts the number of Copilot model requests "
        "you can make within a specific time \n  period. Please try again in 58 hours.",
        None,
        "UTC",
        NOW,
        at(2026, 12, 4, 19, 0),
    ),
    # GitHub Copilot in VS Code, microsoft/vscode#311788.
    (
        "You've hit your global rate limit. Please upgrade your plan or wait 3 hours 43 "
        "minutes for your limit to reset. Learn More",
        None,
        "UTC",
        NOW,
        at(2026, 12, 2, 12, 43),
    ),
    # GitHub Copilot Chat, microsoft/vscode-copilot-release#3210 title.
    (
        "Sorry, your request is rate-limited. Please wait 8 hours 24 minutes and try again",
        None,
        "UTC",
        NOW,
        at(2026, 12, 2, 17, 24),
    ),
    # GitHub Copilot Chat, microsoft/vscode-copilot-release#6479: 24 days as stated;
    # parse_reset answers the horizon (2026-12-09 09:00Z).
    (
        "Sorry, your request was rate-limited. Please wait 587 hours 33 minutes before "
        "trying again.",
        None,
        "UTC",
        NOW,
        at(2026, 12, 26, 20, 33),
    ),
    # Retry-After far in the future: stated as is, the horizon for scheduling.
    ("", "9999-12-31T23:59:59Z", "UTC", NOW, datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)),
    ("", "Wed, 21 Oct 9999 07:28:00 GMT", "UTC", NOW, at(9999, 10, 21, 7, 28)),
]


def clamped(instant: datetime | None, now: datetime) -> datetime | None:
    """What the scheduler gets for a stated instant: never before now, never past the
    week-long horizon."""
    if instant is None:
        return None
    return min(max(instant, now), now + timedelta(days=7))


@pytest.mark.parametrize(("text", "retry_after", "tz", "now", "expected"), RESETS)
def test_parse_reset_reads_real_messages(text, retry_after, tz, now, expected):
    stated = stated_reset(text, now=now, tz=tz, retry_after=retry_after)
    assert stated == expected
    got = parse_reset(text, now=now, tz=tz, retry_after=retry_after)
    assert got == clamped(expected, now)
    if got is not None:
        assert got.tzinfo is UTC and stated.tzinfo is UTC


def test_a_reset_in_the_past_is_now_and_one_beyond_the_horizon_is_the_horizon():
    # Claude Code's raw form (anthropics/claude-code#9046): October 2025, past at NOW.
    assert parse_reset("Claude AI usage limit reached|1760000400", now=NOW) == NOW
    # Claude Code (anthropics/claude-code#65802): next June 7th, half a year ahead.
    weekly = "You've hit your weekly limit · resets Jun 7, 4pm (Europe/Rome)"
    assert stated_reset(weekly, now=NOW) == at(2027, 6, 7, 14, 0)
    assert parse_reset(weekly, now=NOW) == at(2026, 12, 9, 9, 0)
    # Exactly at the horizon, and one second short of it: both as stated.
    assert parse_reset("try again in 7 days", now=NOW) == at(2026, 12, 9, 9, 0)
    assert parse_reset("try again in 6 days 23 hours 59 minutes 59 seconds", now=NOW) == \
        at(2026, 12, 9, 8, 59, 59)


@pytest.mark.parametrize(("value", "expected"), [
    ("120", at(2026, 12, 2, 9, 2)),  # MDN's delta-seconds example
    ("Wed, 21 Oct 2015 07:28:00 GMT", NOW),  # MDN's HTTP-date example: past, so now
    ("2026-12-02T10:00:00+01:00", NOW),  # RFC 3339 with an offset: exactly now
    ("2026-12-02T12:00:00Z", at(2026, 12, 2, 12, 0)),
    ("9999-12-31T23:59:59Z", at(2026, 12, 9, 9, 0)),  # was an overflow later
    ("Wed, 21 Oct 9999 07:28:00 GMT", at(2026, 12, 9, 9, 0)),  # was a pause until 9999
    ("9999-12-31T23:59:59-05:00", at(2026, 12, 9, 9, 0)),  # past datetime.max in UTC
    ("99999999999999999999", at(2026, 12, 9, 9, 0)),
    ("604800", at(2026, 12, 9, 9, 0)),
    ("604801", at(2026, 12, 9, 9, 0)),
    ("soon", None),
    ("-5", None),
    ("1e3", None),
    ("", None),
    ("2026-12-03T10:00:00", None),  # no offset: whose ten o'clock?
    ("2026-12-03", None),  # a day is no instant
    ("Wed, 32 Oct 2026 07:28:00 GMT", None),
    ("0000-01-01T00:00:00Z", None),
])
def test_parse_retry_after_reads_a_header_value_within_the_horizon(value, expected):
    assert parse_retry_after(value, NOW) == expected


def test_the_table_is_big_and_distinct():
    assert len(RESETS) >= 35
    assert len({(row[0], row[1], row[2]) for row in RESETS}) == len(RESETS)


def test_written_offsets_and_posix_zone_names_have_opposite_signs():
    # "GMT+3" in prose is three hours east; the IANA name Etc/GMT+3 is three hours west.
    assert parse_reset("resets 3pm GMT+3", now=NOW) == at(2026, 12, 2, 12, 0)
    assert parse_reset("resets 3pm (UTC+03:00)", now=NOW) == at(2026, 12, 2, 12, 0)
    assert parse_reset("resets 3pm (Etc/GMT+3)", now=NOW) == at(2026, 12, 2, 18, 0)
    assert parse_reset("resets 3pm", now=NOW, tz="Etc/GMT+3") == at(2026, 12, 2, 18, 0)
    assert parse_reset("resets at 2026-12-02T15:00:00+03:00", now=NOW) == at(2026, 12, 2, 12, 0)


def test_twelve_oclock_edges():
    assert parse_reset("resets 12am", now=NOW) == at(2026, 12, 3, 0, 0)
    assert parse_reset("resets 12pm", now=NOW) == at(2026, 12, 2, 12, 0)
    assert parse_reset("resets 12:30 a.m.", now=NOW) == at(2026, 12, 3, 0, 30)
    assert parse_reset("resets 0am", now=NOW) is None
    assert parse_reset("resets 13pm", now=NOW) is None
    assert parse_reset("resets 25:00", now=NOW) is None


def test_spelled_out_delays_and_words_that_only_look_like_them():
    assert parse_reset("try again in an hour", now=NOW) == at(2026, 12, 2, 10, 0)
    assert parse_reset("try again in 1 hour and 30 minutes", now=NOW) == at(2026, 12, 2, 10, 30)
    assert parse_reset("try again in as little as a minute", now=NOW) is None  # not "a s"
    assert parse_reset("try again in a moment", now=NOW) is None


def test_epochs_in_seconds_and_milliseconds_agree():
    seconds = parse_reset("Claude AI usage limit reached|1796216400", now=NOW)
    millis = parse_reset('"resets_at": 1796216400000', now=NOW)
    assert seconds == millis == at(2026, 12, 2, 13, 0)


def test_a_month_day_past_this_year_is_next_years():
    new_year = at(2026, 12, 31, 12, 0)
    assert parse_reset("resets Jan 2, 9am (UTC)", now=new_year) == at(2027, 1, 2, 9, 0)
    assert stated_reset("resets Feb 29, 9am (UTC)", now=NOW) == at(2028, 2, 29, 9, 0)
    assert parse_reset("resets Feb 30, 9am (UTC)", now=NOW) is None


def test_a_time_earlier_today_on_a_dated_reset_is_the_past_not_next_year():
    # "Dec 2, 8am" in Moscow is 05:00Z, four hours before NOW: already reset, so the goal
    # may go on now (read as next year it would wait a whole horizon).
    assert stated_reset("resets Dec 2, 8am (Europe/Moscow)", now=NOW) == at(2026, 12, 2, 5, 0)
    assert parse_reset("resets Dec 2, 8am (Europe/Moscow)", now=NOW) == NOW


def test_naive_now_is_taken_as_utc_and_an_aware_one_in_any_zone_works():
    naive = datetime(2026, 12, 2, 9, 0)
    tokyo = NOW.astimezone(ZoneInfo("Asia/Tokyo"))
    assert parse_reset("try again in 10s", now=naive) == at(2026, 12, 2, 9, 0, 10)
    assert parse_reset("try again in 10s", now=tokyo) == at(2026, 12, 2, 9, 0, 10)


@pytest.mark.parametrize(
    ("text", "kwargs"),
    [
        ("resets 3pm", {"now": "2026-12-02"}),
        ("resets 3pm", {"now": NOW, "tz": None}),
        ("resets 3pm", {"now": NOW, "tz": "../../etc/passwd"}),
        ("resets 3pm (America)", {"now": NOW, "tz": "America"}),
        (None, {"now": NOW}),
        (b"resets 3pm", {"now": NOW}),
        ("", {"now": NOW, "retry_after": "-5"}),
        ("", {"now": NOW, "retry_after": "99999999999999999999"}),
        ("", {"now": NOW, "retry_after": 12.5}),
        ("try again in 5 days", {"now": datetime.max.replace(tzinfo=UTC)}),
        ("resets at 9999-12-31T23:59:59-05:00", {"now": NOW}),
        ("resets 3pm (Etc/GMT+99)", {"now": NOW}),
    ],
)
def test_odd_input_never_raises(text, kwargs):
    got = parse_reset(text, **kwargs)
    assert got is None or got.tzinfo is UTC


# (text, expected class)
CLASSIFICATIONS = [
    # Claude Code raw usage-limit form, anthropics/claude-code#9046.
    ("Claude AI usage limit reached|1760000400", RATE_LIMIT),
    # Claude Code 2.1.207, anthropics/claude-code#77082.
    ("You've hit your session limit · resets 8:30pm (Asia/Tokyo)", RATE_LIMIT),
    # Claude Code 2.0.55, anthropics/claude-code#12789.
    (
        "Weekly limit reached · resets 10am (Asia/Seoul) · /upgrade to Max or turn on /extra-usage",
        RATE_LIMIT,
    ),
    # Claude Code, benbasha/Claude-Autopilot#25.
    ("5-hour limit reached ∙ resets 1am", RATE_LIMIT),
    # Anthropic API 429 in Claude Code's log, anthropics/claude-code#2087.
    (
        'Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"This request'
        " would exceed your account's rate limit. Please try again later.\"}}",
        RATE_LIMIT,
    ),
    # Anthropic API 529, anthropics/claude-code#7218.
    (
        'API Error (529 {"type":"error","error":{"type":"overloaded_error","message":'
        '"Overloaded"},"request_id":null}) · Retrying in 4 seconds… (attempt 4/10)',
        RATE_LIMIT,
    ),
    # Claude Code 2.1.195, anthropics/claude-code#72390.
    (
        "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again"
        " in a moment.",
        RATE_LIMIT,
    ),
    # Anthropic API 400 "usage limits" (a spend cap), anthropics/claude-code#38035.
    (
        "You have reached your specified API usage limits. You will regain access on "
        "2026-04-01 at 00:00 UTC.",
        RATE_LIMIT,
    ),
    # Anthropic API via stagewise, stagewise-io/stagewise#927 (no status in the text).
    (
        "Last error: This request would exceed your organization's rate limit of 30,000 input"
        " tokens per minute (org: 80162711, model: claude-opus-4-6).",
        RATE_LIMIT,
    ),
    # OpenAI API 429, FoundationAgents/MetaGPT#523.
    (
        "Rate limit reached for gpt-4 in organization org-uVqpjtJiKqvVJMVfvpaounIh on tokens "
        "per min (TPM): Limit 10000, Used 8554, Requested 3082. Please try again in 9.816s.",
        RATE_LIMIT,
    ),
    # Codex CLI 0.39.0, openai/codex#4095.
    (
        "■ You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or"
        " try again in 4 days 6 hours 37 minutes.",
        RATE_LIMIT,
    ),
    # Codex backend, earendil-works/pi#4172.
    (
        '{"type":"error","error":{"type":"usage_limit_reached","message":"The usage limit has'
        ' been reached","plan_type":"plus","resets_at":1777936568}}',
        RATE_LIMIT,
    ),
    # Gemini CLI, google-gemini/gemini-cli#2020.
    (
        '✕ [API Error: got status: 429 Too Many Requests. {"error":{"message":"{\\n  \\"error'
        '\\": {\\n    \\"code\\": 429,\\n    \\"message\\": \\"Resource has been exhausted (e.g.'
        ' check quota).\\",\\n    \\"status\\": \\"RESOURCE_EXHAUSTED\\"\\n  }\\n}\\n"}}]',
        RATE_LIMIT,
    ),
    # Gemini CLI via Cloud Code Assist, earendil-works/pi#2851.
    (
        "Cloud Code Assist API error (429): You have exhausted your capacity on this model. "
        "Your quota will reset after 12h34m16s.",
        RATE_LIMIT,
    ),
    # Gemini, comic-translate (ogkalu2/comic-translate#403): quota words, no status line.
    (
        "You exceeded your current quota, please check your plan and billing details. * Quota"
        " exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_"
        "requests, limit: 20, model: gemini-2.5-flash\nPlease retry in 58.821668433s.",
        RATE_LIMIT,
    ),
    # Claude Code, netra-systems/zen#11: an explicit 401.
    (
        'API Error: 401 {"type":"error","error":{"type":"authentication_error","message":'
        '"OAuth token has expired. Please obtain a new token or refresh your existing token."'
        '},"request_id":"a"} · Please run /login',
        AUTH,
    ),
    # Claude Code 1.0.88, anthropics/claude-code#6331.
    ("Invalid API key · Please run /login", AUTH),
    # Claude Code 1.0.98, anthropics/claude-code#6893.
    ("Missing API key · Run /login", AUTH),
    # Claude Code 2.0.19, anthropics/claude-code#9635: a 403, but a revoked token.
    (
        'OAuth token revoked · Please run /login\nError: 403 {"type":"error","error":{"type":'
        '"permission_error","message":"OAuth token has been revoked. Please obtain a new '
        'token."}}',
        AUTH,
    ),
    # Anthropic API via Cline, cline/cline#12.
    (
        'API request failed: 401 {"type":"error","error":{"type":"authentication_error",'
        '"message":"invalid x-api-key"}}',
        AUTH,
    ),
    # OpenAI API via Continue, continuedev/continue#10078.
    (
        "401 Incorrect API key provided: sk-proj-****21sA. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        AUTH,
    ),
    # Gemini API, cequence-io/openai-scala-client#109: a 400, in words only.
    (
        '"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",'
        ' "status": "INVALID_ARGUMENT", "details": [{"reason": "API_KEY_INVALID"}]}',
        AUTH,
    ),
    # Claude Code in a runner, vm0-ai/vm0#29128.
    ("Failed to authenticate. API Error: 401 OAuth access token has been revoked.", AUTH),
    # OpenAI API via Continue, continuedev/continue#8209.
    (
        "400 Your organization must be verified to stream this model. Please go to: "
        "https://platform.openai.com/settings/organization/general and click on Verify "
        "Organization. If you just verified, it can take up to 15 minutes for access to "
        "propagate.",
        OWNER_VERIFICATION,
    ),
    # OpenAI API, community.openai.com ("Unable to Access GPT Image 1 Model…").
    ("403 Your organization must be verified to use the model gpt-image-1.", OWNER_VERIFICATION),
    # OpenAI API via Langflow, langflow-ai/openrag#257.
    (
        "Error code: 400 - {'error': {'message': 'Your organization must be verified to "
        "stream this model. Please go to: https://platform.openai.com/settings/organization/"
        "general and click on Verify Organization.', 'type': 'invalid_request_error', "
        "'param': 'stream', 'code': 'unsupported_value'}}",
        OWNER_VERIFICATION,
    ),
    # The task's wording for identity checks (no verbatim provider sample found).
    ("Identity verification required before you can continue.", OWNER_VERIFICATION),
    # --- Added in the usage-limit review (docs/failures.md) ---------------------------
    # Claude Code 2.1.90, anthropics/claude-code#42654 title: paid extra usage spent.
    ("You're out of extra usage · resets 9am (America/Cordoba)", RATE_LIMIT),
    # Claude Code 2.1.114, anthropics/claude-code#55876 title.
    ("You've hit your limit · resets May 5 at 9pm (America/New_York)", RATE_LIMIT),
    # Anthropic API 500 "Overloaded" (not 529), anthropics/claude-code#8104.
    (
        'API Error: 500 {"type":"error","error":{"type":"api_error","message":"Overloaded"},'
        '"request_id":null}',
        RATE_LIMIT,
    ),
    # Anthropic API prepaid credits, anthropics/claude-code#4684 (a 400): billing, waited
    # out with backoff like OpenAI's insufficient_quota (docs/decisions.md).
    (
        'Error: 400 {"type":"error","error":{"type":"invalid_request_error","message":"Your '
        "credit balance is too low to access the Anthropic API. Please go to Plans & Billing "
        'to upgrade or purchase credits."}}',
        RATE_LIMIT,
    ),
    # OpenAI API insufficient_quota, Pythagora-io/gpt-pilot#340.
    (
        "API responded with status code: 429. Response text: {\n    \"error\": {\n        "
        '"message": "You exceeded your current quota, please check your plan and billing '
        'details.",\n        "type": "insufficient_quota",\n        "param": null,\n        '
        '"code": "insufficient_quota"\n    }\n}',
        RATE_LIMIT,
    ),
    # Azure OpenAI at peak load, pollinations/pollinations#6260: capacity, no status.
    (
        "azure-openai error: The system is currently experiencing high demand and cannot "
        "process your request. Your request exceeds the maximum usage size allowed during "
        "peak load. Please retry after 20 seconds.",
        RATE_LIMIT,
    ),
    # Azure OpenAI, microsoft/action-python#12.
    (
        "Requests to the Creates a completion for the chat message Operation under Azure "
        "OpenAI API version 2023-03-15-preview have exceeded call rate limit of your current "
        "OpenAI S0 pricing tier. Please retry after 3 seconds.",
        RATE_LIMIT,
    ),
    # AWS Bedrock ThrottlingException, i-dot-ai/caddy-chatbot#97.
    (
        "botocore.errorfactory.ThrottlingException: An error occurred (ThrottlingException) "
        "when calling the InvokeModel operation (reached max retries: 4): Too many requests, "
        "please wait before trying again. You have sent too many requests. Wait before trying "
        "again.",
        RATE_LIMIT,
    ),
    # AWS Bedrock ServiceUnavailableException, langchain-ai/langchain-aws#968.
    (
        "botocore.errorfactory.ServiceUnavailableException: An error occurred "
        "(ServiceUnavailableException) when calling the Converse operation (reached max "
        "retries: 4): Too many connections, please wait before trying again.",
        RATE_LIMIT,
    ),
    # AWS Bedrock through LiteLLM, aws-samples/foundation-model-benchmarking-tool#247: the
    # exception type only in a header, a 400 status that decides nothing.
    (
        "litellm.APIConnectionError: Bad response code, expected 200: {'status_code': 400, "
        "'headers': {':exception-type': 'serviceUnavailableException', ':content-type': "
        "'application/json', ':message-type': 'exception'}, 'body': b'{\"message\":\"Bedrock "
        "is unable to process your request.\"}'}",
        RATE_LIMIT,
    ),
    # Mistral, cline/cline#9085.
    (
        'API error occurred: Status 429 Content-Type application/json Body \n{"object":'
        '"error","message":"Rate limit exceeded","type":"rate_limited","param":null,"code":'
        '"1300"}',
        RATE_LIMIT,
    ),
    # Mistral, pydantic/pydantic-ai#1885.
    (
        "pydantic_ai.exceptions.ModelHTTPError: status_code: 429, model_name: "
        'mistral-medium-latest, body: {"message":"Requests rate limit exceeded"}',
        RATE_LIMIT,
    ),
    # Mistral capacity (a 503 per BerriAI/litellm#25078), continuedev/continue#6185.
    (
        '{"object":"error","message":"Service tier capacity exceeded for this model.","type":'
        '"invalid_request_error","param":null,"code":null}',
        RATE_LIMIT,
    ),
    # Groq, continuedev/continue#10920.
    (
        "429 Rate limit reached for model `llama-3.3-70b-versatile` in organization "
        "`org_01kjh7p9n8f1qs6nz2bz77vy6b` service tier `on_demand` on tokens per day (TPD): "
        "Limit 100000, Used 97050, Requested 3619. Please try again in 9m38.016s.",
        RATE_LIMIT,
    ),
    # xAI API, continuedev/continue#10373: a 429 whose body is a quoted string.
    (
        '429 "Your team 16f2151a-40f4-4a80-8ad0-cae00c27e8dd has either used all available '
        "credits or reached its monthly spending limit. To continue making API requests, "
        'please purchase more credits or raise your spending limit."',
        RATE_LIMIT,
    ),
    # xAI Grok CLI, Anantys-oss/koan#2412: the same cap as a 403.
    (
        '"message": "API error (status 403 Forbidden): permission-denied: Your team '
        "deadb-a58d-46ca-80a1-beefbeef has either used all available credits or reached its "
        'monthly spending limit."',
        RATE_LIMIT,
    ),
    # DeepSeek, continuedev/continue#11787 (prepaid balance, billing like the above).
    ("402 Insufficient Balance", RATE_LIMIT),
    # Cohere Python SDK, e-p-armstrong/verustoolkit#1 title: snake_case status and class.
    ("cohere.errors.too_many_requests_error.TooManyRequestsError: status_code: 429", RATE_LIMIT),
    # OpenRouter free tier, n8n-io/n8n#19117.
    (
        "Rate limit exceeded: free-models-per-day. Add 10 credits to unlock 1000 free model "
        "requests per day",
        RATE_LIMIT,
    ),
    # Gemini CLI daily window, google-gemini/gemini-cli#7709.
    (
        "You've hit your daily limit of requests with Gemini 2.5 Pro. Switching to Gemini "
        "2.5 Flash.",
        RATE_LIMIT,
    ),
    # Gemini capacity 503, google-gemini/gemini-cli#23520.
    (
        '{"error": {"code": 503, "details": [{"@type": "type.googleapis.com/google.rpc.'
        'ErrorInfo", "domain": "cloudcode-pa.googleapis.com", "reason": '
        '"MODEL_CAPACITY_EXHAUSTED"}], "message": "No capacity available for model on the '
        'server", "status": "UNAVAILABLE"}}',
        RATE_LIMIT,
    ),
    # Gemini CLI, google-gemini/gemini-cli#12932 title.
    ("503. The model is overloaded.", RATE_LIMIT),
    # Together AI through Cline, cline/cline#440.
    ("503 server is overloaded.", RATE_LIMIT),
    # Ollama Cloud, ollama/ollama#15934.
    (
        'Ollama error 503 Service Unavailable: {"error":"Server overloaded, please retry '
        'shortly (ref: aaa65c70-cfa0-446b-86f1-4ab0e2deb9e4)"}',
        RATE_LIMIT,
    ),
    # GitHub Copilot CLI, github/copilot-cli#2696.
    (
        "✗ Sorry, you've hit a rate limit that restricts the number of Copilot model requests "
        "you can make within a specific time period. Please try again in 58 hours.",
        RATE_LIMIT,
    ),
    # GitHub Copilot in VS Code, microsoft/vscode#311788.
    (
        "You've hit your global rate limit. Please upgrade your plan or wait 3 hours 43 "
        "minutes for your limit to reset.",
        RATE_LIMIT,
    ),
    # Claude Code, anthropics/claude-code#19018: the context window, not a quota.
    ("Context limit reached · /compact or /clear to continue", UNCLASSIFIED),
    # Claude Code, anthropics/claude-code#6559: "try again" after a context overflow.
    (
        'API Error: 400 {"type":"error","error":{"type":"invalid_request_error","message":'
        '"input length and `max_tokens` exceed context limit: 197202 + 21333 > 200000, '
        'decrease input length or `max_tokens` and try again"}}',
        UNCLASSIFIED,
    ),
    # Claude Code, anthropics/claude-code#30401.
    (
        "Error: Error during compaction: Error: Conversation too long. Press esc twice to go "
        "up a few messages and try again.",
        UNCLASSIFIED,
    ),
    # Claude Code log line, anthropics/claude-code#11429.
    ("Error: Insufficient permissions for global npm install.", UNCLASSIFIED),
    ("", UNCLASSIFIED),
    # Mixed signals, built from two real messages (continue#10078, then continue#11472):
    # the later status is the live failure…
    (
        "401 Incorrect API key provided: sk-proj-****21sA.\n429 Rate limit reached for "
        "gpt-4.1 in organization org-66tr5xhH5yhaqZAy6PAIy1Xi on tokens per min (TPM): Limit "
        "30000, Used 18928, Requested 11159. Please try again in 174ms.",
        RATE_LIMIT,
    ),
    # …and the other way round.
    (
        "429 Rate limit reached for gpt-4.1 in organization org-66tr5xhH5yhaqZAy6PAIy1Xi on "
        "tokens per min (TPM). Please try again in 174ms.\n401 Incorrect API key provided: "
        "sk-proj-****21sA.",
        AUTH,
    ),
    # A 429 whose body talks about the API key (constructed: the OpenAI 429 wording plus a
    # client's note) is still a rate limit: the status decides.
    (
        "Error code: 429 - Rate limit reached for gpt-4o on requests per min (RPM). Invalid "
        "API key usage pattern? Check the api key in your config.",
        RATE_LIMIT,
    ),
    # --- Per-minute limits and wrapped notices: what still fell through ----------------
    # Claude Code's API-key 429, which names no usage window and no reset.
    ("API Error: Request rejected (429) · try again later", RATE_LIMIT),
    # Anthropic's server-side throttling, anthropics/claude-code#62527, wrapped by the
    # terminal as the issue quotes it.
    ("API Error: Server is temporarily limiting requests (not your usage limit) · Rate\n"
     "      limited", RATE_LIMIT),
    # The same wrapped mid-word: nothing of it readable without the join.
    ("API Error: Server is tempo\n     rarily limiting requests", RATE_LIMIT),
    # Codex, openai/codex#6498 (an expired refresh token): a human must sign in again.
    ("Your access token could not be refreshed because your refresh token was already "
     "used. Please log out and sign in again.", AUTH),
    # Codex through cc-switch, farion1231/cc-switch#4022.
    ("Your access token could not be refreshed because your refresh token was revoked. "
     "Please log out and sign in again.", AUTH),
    # A refresh at 401, jlcodes99/cockpit-tools#2093 (the English part).
    ("Token refresh failed: status=401 Unauthorized, error_code=refresh_token_invalidated",
     AUTH),
    # OpenAI's 429 for one request larger than the per-minute limit, openai/codex#38366
    # and continuedev/continue#10602: no wait lifts it.
    ("■ stream disconnected before completion: Request too large for gpt-5.6-luna in "
     "organization org-b4g4X7AHZEEhfU5LlCT6H4N4 on tokens per min (TPM): Limit 200000, "
     "Requested 208334. The input or output tokens must be reduced in order to run "
     "successfully. Visit https://platform.openai.com/account/rate-limits to learn more.",
     REQUEST_TOO_LARGE),
    ("429 Request too large for gpt-4o in organization org-vyUrKHsIdLcZGKR3zqCqllrS on "
     "tokens per min (TPM): Limit 30000, Requested 61337. The input or output tokens must "
     "be reduced in order to run successfully.", REQUEST_TOO_LARGE),
]


@pytest.mark.parametrize(("text", "expected"), CLASSIFICATIONS)
def test_classify_reads_real_messages(text, expected):
    assert classify(text) == expected
    assert classify(text.upper()) == expected  # case does not matter


def test_the_classify_table_covers_every_class():
    assert len(CLASSIFICATIONS) >= 25
    assert {expected for _, expected in CLASSIFICATIONS} == set(CLASSES)


def test_classify_of_non_text_is_unclassified():
    assert classify(None) == UNCLASSIFIED  # type: ignore[arg-type]
    assert classify(b"429 Too Many Requests") == UNCLASSIFIED  # type: ignore[arg-type]


# --- properties ----------------------------------------------------------------------

# Pieces of real messages, so that random texts reach the parsers and not only the scanner.
FRAGMENTS = [
    "resets ",
    "reset at ",
    "try again in ",
    "try again at ",
    "retry after ",
    "Retry-After: ",
    '"retryDelay": "',
    '"resets_at": ',
    "x-ratelimit-reset-tokens: ",
    "limit reached|",
    "anthropic-ratelimit-tokens-reset: ",
    "until ",
    "3pm",
    "12:50am",
    "7:38 AM",
    "11:15",
    " (America/New_York)",
    " (Etc/GMT+5)",
    " (Mars/Olympus)",
    " GMT+3",
    "Z",
    " UTC",
    "Oct 19th, ",
    "Feb 29, ",
    "2026-12-03",
    "T10:15:00",
    "1760000400",
    "1796216400000",
    "9.816s",
    "644ms",
    "6m0s",
    "4 days 3 hours",
    "99999999999",
    " at ",
    ", ",
    "\n",
    "·",
    "İ",
    "\u2212",
    '\\"',
    "9999-12-31T23:59:59Z",
    "Wed, 21 Oct 9999 07:28:00 GMT",
    "wait ",
    "587 hours 33 minutes",
]
texts = st.one_of(
    st.text(),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)), max_size=30).map("".join),
)
nows = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)
zones = st.one_of(
    st.sampled_from(["UTC", "America/New_York", "Etc/GMT+5", "Asia/Kolkata", "Nope/Nope"]),
    st.text(max_size=12),
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, now=nows, tz=zones, retry_after=st.one_of(st.none(), st.text(max_size=12)))
def test_parse_reset_never_raises_and_answers_in_utc(text, now, tz, retry_after):
    got = parse_reset(text, now=now, tz=tz, retry_after=retry_after)
    assert got is None or (got.tzinfo is UTC and got.utcoffset() == timedelta(0))


# Retry-After values of every shape, well formed or not, near and absurdly far.
retry_after_values = st.one_of(
    st.none(),
    st.text(max_size=40),
    st.integers(min_value=0, max_value=10**30).map(str),
    st.decimals(min_value=0, max_value=10**9, places=3).map(str),
    st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(9999, 12, 31)).map(
        lambda moment: format_datetime(moment.replace(tzinfo=UTC), usegmt=True)
    ),
    st.datetimes(
        min_value=datetime(1, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.sampled_from(
            [UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-12))]
        ),
    ).map(datetime.isoformat),
)
# Room for the horizon after `now` (a `now` in the last week of 9999 cannot have one).
nows_with_room = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 24), timezones=st.just(UTC)
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, now=nows_with_room, tz=zones, retry_after=retry_after_values)
def test_parse_reset_answers_none_or_an_instant_within_the_horizon(text, now, tz, retry_after):
    got = parse_reset(text, now=now, tz=tz, retry_after=retry_after)
    assert got is None or (got.tzinfo is UTC and now <= got <= now + RESET_HORIZON)
    assert got == clamped(stated_reset(text, now=now, tz=tz, retry_after=retry_after), now)


@settings(max_examples=300)
@given(value=retry_after_values, now=nows_with_room)
def test_parse_retry_after_answers_none_or_an_instant_within_the_horizon(value, now):
    got = parse_retry_after(value, now)
    assert got is None or (got.tzinfo is UTC and now <= got <= now + RESET_HORIZON)


@settings(max_examples=8, deadline=None)
@given(piece=texts, times=st.integers(min_value=1_000, max_value=20_000))
def test_parse_reset_and_classify_survive_huge_text(piece, times):
    text = ((piece or "x") * times)[:120_000]
    got = parse_reset(text, now=NOW)
    assert got is None or got.tzinfo is UTC
    assert classify(text) in CLASSES


def test_a_long_log_is_read_to_its_end():
    # Half a megabyte of Claude Code error log lines (anthropics/claude-code#11429's shape,
    # each with a "timestamp" that is no reset), then the notice that names the reset.
    line = (
        '{"error":"Error: 429 {\\"type\\":\\"rate_limit_error\\"}","timestamp":'
        '"2026-12-02T08:59:00.000Z"}\n'
    )
    text = line * (500_000 // len(line)) + "You've hit your limit · resets 10pm (America/New_York)"
    assert parse_reset(text, now=NOW) == at(2026, 12, 3, 3, 0)
    assert classify(text) == RATE_LIMIT


@settings(max_examples=200)
@given(text=texts)
def test_classify_always_answers_one_of_four(text):
    assert classify(text) in CLASSES


clock_times = st.tuples(
    st.integers(min_value=1, max_value=12),
    st.integers(min_value=0, max_value=59),
    st.sampled_from(["am", "pm"]),
)
plausible_nows = st.datetimes(
    min_value=datetime(1990, 1, 1), max_value=datetime(2090, 1, 1), timezones=st.just(UTC)
)


@given(
    clock=clock_times,
    now=plausible_nows,
    zone=st.sampled_from(["UTC", "Etc/GMT+5", "Etc/GMT-14", "Asia/Kolkata", "Asia/Tokyo"]),
)
def test_a_time_only_reset_is_the_next_such_wall_time_within_a_day(clock, now, zone):
    hour, minute, marker = clock
    got = parse_reset(f"resets {hour}:{minute:02d}{marker} ({zone})", now=now)
    assert now <= got <= now + timedelta(hours=24)
    wall = got.astimezone(ZoneInfo(zone))
    assert (wall.hour, wall.minute) == (hour % 12 + (12 if marker == "pm" else 0), minute)


@given(
    clock=clock_times,
    now=plausible_nows,
    zone=st.sampled_from(
        ["America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "America/Santiago"]
    ),
)
def test_with_daylight_saving_the_next_wall_time_is_within_the_longest_civil_day(clock, now, zone):
    # A fall-back day lasts 25 hours, so "the next 3am" can be up to 25 h away.
    hour, minute, marker = clock
    got = parse_reset(f"resets {hour}:{minute:02d}{marker}", now=now, tz=zone)
    assert now <= got <= now + timedelta(hours=25)


@given(offset=st.integers(min_value=-12, max_value=14), now=plausible_nows)
def test_a_written_offset_means_east_of_greenwich(offset, now):
    written = parse_reset(f"resets 3pm GMT{offset:+d}", now=now)
    fixed = timezone(timedelta(hours=offset))
    assert written.astimezone(fixed).hour == 15

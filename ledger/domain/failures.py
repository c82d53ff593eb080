"""Reading an agent's failure text: what kind of failure it is.

``classify`` sorts a failure into a rate limit (wait, then resume), an authentication
failure (a human must log in again), an owner/organization verification demand (a human
must verify; neither waiting nor logging in helps), a request too large for the
per-minute limit itself (a human must shrink it or raise the limit; waiting never helps)
or ``unclassified``. ``usage_window`` tells a usage window (hours to a week: "You've hit
your usage limit") from a per-minute request limit or server-side throttling (seconds
to minutes: "Request rejected (429) · try again later"), for the backoff when no reset
is stated. When a limit resets is ``ledger.domain.resets``'s job.

A terminal wraps long lines with a hard line break, anywhere, even inside a word or a
number ("(not your\n     usage limit) · Rate\n     limited"): ``unwrapped`` joins the
lines again, and the readers fall back to it when the text as given says nothing.

Pure: no Django, no clock, no network; linear in the text.
"""

from __future__ import annotations

import re
import string

RATE_LIMIT = "rate_limit"
AUTH = "auth"
OWNER_VERIFICATION = "owner_verification"
REQUEST_TOO_LARGE = "request_too_large"
UNCLASSIFIED = "unclassified"
CLASSES = (RATE_LIMIT, AUTH, OWNER_VERIFICATION, REQUEST_TOO_LARGE, UNCLASSIFIED)

_WRAP = re.compile(r"\r?\n[ \t]*")


def unwrapped(text: str) -> str:
    """The text with every line break (and the indentation after it) removed: a
    terminal's hard wraps undone, mid-word ones included."""
    return _WRAP.sub("", text)


# Long texts are scanned lowercased instead of with re.IGNORECASE, which makes Python's re
# several times slower. ASCII only, so the copy has the same length and the same positions
# as the original (str.lower() turns "İ" into two characters).
ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)

# ---------------------------------------------------------------------------------------
# classify
# ---------------------------------------------------------------------------------------

# The most specific class: a 400/403 telling a human to verify the organization (OpenAI's
# "Your organization must be verified to stream this model ... click on Verify
# Organization"). Waiting does not lift it and logging in again does not either.
_OWNER = re.compile(
    r"organi[sz]ation\s+(?:must\s+be|is\s+not|has\s+not\s+been|needs\s+to\s+be)\s+verified"
    r"|verify\s+(?:your\s+)?organi[sz]ation"
    r"|(?:owner|account\s+owner)\s+(?:must|needs\s+to)\s+be\s+verified"
    r"|identity\s+verification\s+(?:is\s+)?required"
    r"|verify\s+your\s+identity",
)

# One request larger than the per-minute limit itself: OpenAI's 429 "Request too large
# for gpt-4o in organization … on tokens per min (TPM): Limit 30000, Requested 342389.
# The input or output tokens must be reduced in order to run successfully", Groq's
# "Request too large for model …". No wait lifts it, unlike "Rate limit reached for
# gpt-4o … Limit 10000, Used 8554, Requested 3082. Please try again in 9.816s".
_TOO_LARGE = re.compile(
    r"request\s+too\s+large\s+for|must\s+be\s+reduced\s+in\s+order\s+to\s+run\s+successfully",
)

# An HTTP status the text states as a status, not any number that happens to be 401:
# "API Error: 401 {...}", "Error: 429 {", "Error code: 429 - {...}", "API Error (529 {",
# "got status: 429 Too Many Requests", '"code": 429', "status_code: 429" (Python SDKs),
# '429 "Your team …' (xAI), "HTTP/1.1 429", "429 Rate limit
# reached for gpt-4o", "401 Incorrect API key provided". A bare "Limit 10000, Used 401"
# is no status. \W{0,6} lets escaped JSON through (\"code\\\": 429).
_STATUS = re.compile(
    r"(?:\berror|\bstatus(?:[\s_]?code)?|\bcode|\bhttp(?:/[0-9](?:\.[0-9])?)?)\W{0,6}"
    r"(401|429|529)\b"
    r"|\b(401|429|529)\s+(?:\{|\"|too\s+many\s+requests|unauthori[sz]ed|overloaded|rate\s+limit"
    r"|resource|incorrect\s+api\s+key|invalid)"
    # Claude Code's "API Error: Request rejected (429) · try again later" (an API key's 429).
    r"|\brejected\s*\((401|429|529)\)",
)

# Rate limits, quotas, usage windows (paid extra usage included), capacity and overload
# notices (a 503 "Service Unavailable" is waited out like a 529), prepaid balances. Not a
# bare "limit reached": Claude Code's "Context limit reached · /compact" is about the
# context window, not a quota.
_RATE = re.compile(
    r"rate[\s_-]?limit|too[\s_-]+many[\s_-]+(?:requests|tokens|connections)|quota"
    r"|usage[\s_-]+limit|usage\s+window|out\s+of\s+(?:extra\s+)?usage"
    r"|(?:weekly|daily|monthly|hourly|session|opus|sonnet|5[\s-]?hour|five[\s-]hour)\s+limit"
    r"|hit\s+your\s+(?:(?:usage|session|weekly|daily|monthly|opus|sonnet|5-hour|rate)\s+)?limit"
    r"|overloaded|resource[\s_]+(?:has\s+been\s+)?exhausted|exhausted\s+your\s+capacity"
    r"|(?:over|at|out\s+of|insufficient|no)\s+capacity|capacity[\s_]+(?:constraints?|exceeded"
    r"|exhausted)|high\s+demand|peak\s+load|service[\s_]?unavailable"
    r"|throttl|(?:tokens|requests)\s+per\s+(?:min|minute|day)\b"
    # Anthropic's server-side throttling: "Server is temporarily limiting requests (not
    # your usage limit) · Rate limited" (anthropics/claude-code#62527 and many since).
    r"|temporarily\s+limiting\s+requests"
    # Prepaid balance and spend caps: billing, but like OpenAI's insufficient_quota they
    # lift without a new login, so the goal waits (with backoff) instead of failing.
    r"|insufficient[\s_]+(?:balance|credits?|funds)|credit\s+balance\s+is\s+too\s+low"
    r"|spending\s+limit|used\s+all\s+(?:(?:of\s+)?(?:your|the)\s+)?(?:available\s+)?credits",
)

# Expired, revoked or invalid credentials, and "log in again" prompts. "api key" alone is
# no signal: OpenAI's rate-limit bodies name the organization and key they counted.
_AUTH = re.compile(
    r"oauth\s+(?:access\s+)?token\s+(?:has\s+)?(?:expired|been\s+revoked|revoked)"
    r"|token\s+(?:has\s+)?expired|(?:access|refresh)\s+token\s+(?:is\s+)?(?:invalid|expired)"
    r"|authentication[_\s]error|authentication\s+failed|failed\s+to\s+authenticate"
    r"|invalid\s+(?:x-api-key|api[\s_-]?key|authentication|bearer|credentials|token)"
    r"|incorrect\s+api\s+key|api\s+key\s+not\s+(?:valid|found)|api_key_invalid|invalid_api_key"
    r"|missing\s+api\s+key|no\s+api\s+key|run\s+/login|logged\s+out|not\s+logged\s+in"
    r"|please\s+log\s*in|login\s+required|unauthori[sz]ed|unauthenticated"
    r"|could\s+not\s+resolve\s+authentication"
    # Codex (openai/codex#6498): "Your access token could not be refreshed because your
    # refresh token was already used [was revoked]. Please log out and sign in again."
    r"|token\s+could\s+not\s+be\s+refreshed|refresh[\s_]token[\s_](?:was\s+|has\s+been\s+)?"
    r"(?:already\s+used|revoked|invalidated)|(?:sign|log)\s+in\s+again",
)

# A per-minute request limit or the server's own throttling: seconds to minutes. Checked
# before the usage words, since Anthropic's throttling says "(not your usage limit)".
_REQUEST_RATE = re.compile(
    r"per\s+min(?:ute)?\b|\b[rt]pm\b|temporarily\s+limiting|not\s+your\s+usage\s+limit"
    r"|overloaded|high\s+demand|capacity|service[\s_]?unavailable|\b529\b",
)
# A usage window (5-hour, daily, weekly, monthly, a plan's quota) or a prepaid balance:
# hours or more. Gemini's RESOURCE_EXHAUSTED counts here unless it names a per-minute
# quota ("Quota exceeded for metric … per minute").
_USAGE = re.compile(
    r"usage[\s_-]+limit|usage\s+window|out\s+of\s+(?:extra\s+)?usage|quota|resource[\s_]+"
    r"(?:has\s+been\s+)?exhausted|(?:weekly|daily|monthly|session|opus|sonnet|5[\s-]?hour"
    r"|five[\s-]hour)\s+limit|hit\s+your\s+(?:(?:usage|session|weekly|daily|monthly|opus"
    r"|sonnet|5-hour)\s+)?limit|limit\s+reached\s*\||credit|balance|spending\s+limit",
)


def usage_window(text: str) -> bool:
    """A rate limit whose text names a usage window or a balance (wait hours), rather
    than a per-minute request limit, server throttling or nothing (wait minutes). Read
    on the text as given and unwrapped; a request-rate word anywhere decides."""
    try:
        if not isinstance(text, str):
            return False
        lowered = text.translate(ASCII_LOWER)
        joined = unwrapped(lowered)
        if _REQUEST_RATE.search(lowered) or _REQUEST_RATE.search(joined):
            return False
        return bool(_USAGE.search(lowered) or _USAGE.search(joined))
    except Exception:  # a classifier of failures must not fail itself
        return False


def _last_start(pattern: re.Pattern[str], text: str) -> int | None:
    last = None
    for match in pattern.finditer(text):
        last = match.start()
    return last


def classify(text: str) -> str:
    """Sort a failure text into ``rate_limit``, ``auth``, ``owner_verification``,
    ``request_too_large`` or ``unclassified`` (case-insensitive; never raises). A text
    that says nothing as given is read again unwrapped (a terminal's hard line breaks
    undone).

    Deciding when the words disagree:

    1. Owner/organization verification wins outright: it is the most specific message,
       and no rate-limit or auth body asks a human to verify the organization. Then a
       request too large for the per-minute limit (a 429, but no wait helps).
    2. Otherwise an HTTP status the text states as a status decides: 401 is ``auth``,
       429 and 529 (Anthropic's overloaded) are ``rate_limit``, whatever words the body
       adds (a 429 whose message names the "API key" it counted is still a rate limit). A
       log with several statuses is decided by the last one: the newest failure is live.
    3. Otherwise the words decide; when both kinds appear, the later mention wins, again
       because a log is read oldest first.
    """
    try:
        if not isinstance(text, str) or not text:
            return UNCLASSIFIED
        text = text.translate(ASCII_LOWER)  # the patterns are lowercase
        found = _classify(text)
        return found if found != UNCLASSIFIED or "\n" not in text else _classify(unwrapped(text))
    except Exception:  # a classifier of failures must not fail itself
        return UNCLASSIFIED


def _classify(text: str) -> str:
    """``classify`` of a lowercased text."""
    if _OWNER.search(text):
        return OWNER_VERIFICATION
    if _TOO_LARGE.search(text):
        return REQUEST_TOO_LARGE
    status = None
    for match in _STATUS.finditer(text):
        status = match.group(1) or match.group(2) or match.group(3)
    if status == "401":
        return AUTH
    if status in ("429", "529"):
        return RATE_LIMIT
    rate, auth = _last_start(_RATE, text), _last_start(_AUTH, text)
    if rate is None and auth is None:
        return UNCLASSIFIED
    if auth is None:
        return RATE_LIMIT
    if rate is None:
        return AUTH
    return RATE_LIMIT if rate > auth else AUTH

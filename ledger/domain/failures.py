"""Reading an agent's failure text: what kind of failure it is.

``classify`` sorts a failure into a rate limit (wait, then resume), an authentication
failure (a human must log in again), an owner/organization verification demand (a human
must verify; neither waiting nor logging in helps) or ``unclassified``. When a limit
resets is ``ledger.domain.resets``'s job.

Pure: no Django, no clock, no network; linear in the text.
"""

from __future__ import annotations

import re
import string

RATE_LIMIT = "rate_limit"
AUTH = "auth"
OWNER_VERIFICATION = "owner_verification"
UNCLASSIFIED = "unclassified"
CLASSES = (RATE_LIMIT, AUTH, OWNER_VERIFICATION, UNCLASSIFIED)


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
    r"|resource|incorrect\s+api\s+key|invalid)",
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
    r"|could\s+not\s+resolve\s+authentication",
)


def _last_start(pattern: re.Pattern[str], text: str) -> int | None:
    last = None
    for match in pattern.finditer(text):
        last = match.start()
    return last


def classify(text: str) -> str:
    """Sort a failure text into ``rate_limit``, ``auth``, ``owner_verification`` or
    ``unclassified`` (case-insensitive; never raises).

    Deciding when the words disagree:

    1. Owner/organization verification wins outright: it is the most specific message,
       and no rate-limit or auth body asks a human to verify the organization.
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
        if _OWNER.search(text):
            return OWNER_VERIFICATION
        status = None
        for match in _STATUS.finditer(text):
            status = match.group(1) or match.group(2)
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
    except Exception:  # a classifier of failures must not fail itself
        return UNCLASSIFIED

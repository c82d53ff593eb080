"""Shape and size rules for what agents send. Pure: no Django here.

The API validates the same limits first to answer per field, but these are the
authority: a command that reaches ``decide`` from anywhere (CLI, admin,
scheduler) is checked again.
"""

import posixpath
import re
import unicodedata
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

import regex

from ledger.domain import confusables
from ledger.domain.errors import InvalidCommand
from ledger.domain.events import iso

MAX_OBJECTIVE = 2000
MAX_KEY = 200
MAX_WORKSPACE = 1024
MAX_STEP = 500
MAX_ITEM = 1000
MAX_NOTE = 4000
MAX_ITEMS = 100
MAX_ARTIFACTS = 200
MAX_PATH = 1024

_SHA256 = re.compile(r"[0-9a-f]{64}")

# Obvious credentials. Agents paste them into objectives and notes by
# accident; once in an event they are there forever (append-only), so refuse.
# Patterns are anchored on a vendor's fixed prefix or on an assignment to a
# credential's name, so prose about keys and tokens still passes
# (tests/api/test_secret_filter.py).
#
# Each pattern comes with literals that any match must contain (in some case). This check
# runs on every text of every command (six on a checkpoint), and one regex
# alternation of all of them cost about 25 us a text: the engine tries every
# branch at every position. A substring test is a C scan, so a pattern's regex
# runs only on text that holds one of its literals. ``_SECRET`` (the plain
# alternation) stays the definition: a property test checks both agree.
_PATTERNS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("sk-",), r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}"),  # OpenAI / Anthropic keys
    (("k_live_", "k_test_"), r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"),  # Stripe keys
    (("whsec_",), r"\bwhsec_[A-Za-z0-9+/=]{20,}"),  # Stripe webhook secrets
    (("gh",), r"\bgh[pousr]_[A-Za-z0-9]{30,}"),  # GitHub tokens
    (("github_pat_",), r"\bgithub_pat_[A-Za-z0-9_]{30,}"),
    (("glpat-",), r"\bglpat-[A-Za-z0-9_-]{20,}"),  # GitLab personal access tokens
    (("npm_",), r"\bnpm_[A-Za-z0-9]{30,}"),  # npm tokens
    (("pypi-",), r"\bpypi-[A-Za-z0-9_-]{50,}"),  # PyPI upload tokens
    (("hf_",), r"\bhf_[A-Za-z0-9]{30,}"),  # Hugging Face tokens
    (("AKIA", "ASIA", "ABIA", "ACCA"),
     r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),  # AWS access key ids (long-term, STS)
    (("xox",), r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),  # Slack
    (("AIza",), r"\bAIza[0-9A-Za-z_-]{35}\b"),  # Google API key
    (("ya29.",), r"\bya29\.[0-9A-Za-z_-]{20,}"),  # Google OAuth access token
    (("-----BEGIN ",), r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    (("Bearer",), r"\bBearer\s+[A-Za-z0-9._~+/=-]{20,}"),
    # A JWT: base64url header and payload of a JSON object ("eyJ" is "{\"").
    ((".eyJ",), r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*"),
    # user:password@ inside a URL (postgres://u:p@db, https://u:p@host).
    (("://",), r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]+:[^\s/@]+@"),
    # NAME=value where NAME says it holds a credential (PGPASSWORD=…,
    # aws_secret_access_key = …, DB_PASSWORD="…"); "$VAR", "<…>" and "{…}"
    # are references to one, not one. Its literals are looked for in the
    # lower-cased text (the name matches in any case).
    (("passw", "secret_access_key", "session_token", "secret_key", "api_key", "apikey",
      "access_token", "auth_token", "client_secret", "private_key"),
     r"(?i:\b[A-Z0-9_]*(?:PASSWORD|PASSWD|SECRET_ACCESS_KEY|SESSION_TOKEN|SECRET_KEY"
     r"|API_KEY|APIKEY|ACCESS_TOKEN|AUTH_TOKEN|CLIENT_SECRET|PRIVATE_KEY)"
     r"\s*[=:]\s*[\"']?[^\s\"'$<{][^\s\"']{7,})"),
    (("wl_",), r"\bwl_[A-Za-z0-9]{8}_[A-Za-z0-9_-]{20,}"),  # our own API tokens
    (("wll_",), r"\bwll_[A-Za-z0-9_-]{20,}"),  # our own lease tokens
)
_SECRET = re.compile("|".join(pattern for _, pattern in _PATTERNS))
# Looked for in the lower-cased text: for the case-sensitive patterns a weaker
# condition than the literal itself, which is fine for a filter in front of
# the real regex, and the one pass serves the case-insensitive one too.
_LITERALS = tuple((literal.lower(), re.compile(pattern).search)
                  for literals, pattern in _PATTERNS for literal in literals)
# The literals grouped by a character each of them holds ("" for those with
# none of these): a text without "_" (most prose) skips 16 of the 33 substring
# scans with one. A literal is only looked for where its gate is, and a text
# holding the literal holds its gate, so the groups find what the list did.
_GATES = "_-.:"


def _gated() -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    groups: dict[str, list[tuple[str, Any]]] = {gate: [] for gate in (*_GATES, "")}
    for literal, search in _LITERALS:
        groups[next((c for c in _GATES if c in literal), "")].append((literal, search))
    return tuple((gate, tuple(group)) for gate, group in groups.items() if group)


_GATED = _gated()


# The only characters outside ASCII that case-insensitive matching takes for
# an ASCII letter (U+0130 and U+0131, the dotted and dotless I, are "i";
# U+017F, the long s, is "s"; the Kelvin sign is "k").
# Any other text, whatever its script, holds a pattern's literal where the
# pattern matches.
_CASE_TWINS = re.compile("[\u0130\u0131\u017f\u212a]")


def _scan(text: str) -> bool:
    if not text.isascii() and _CASE_TWINS.search(text) is not None:
        # Case folding would slip them past the literals: scan it whole.
        return _SECRET.search(text) is not None
    lowered = text.lower()
    # Plain loops, not any(): the generator costs more than the scan here.
    for gate, group in _GATED:
        if gate and gate not in lowered:
            continue
        for literal, search in group:
            if literal in lowered and search(text) is not None:
                return True
    return False


# Format characters (zero-width space and joiners, word joiner, BOM, soft
# hyphen, and the bidirectional embeddings, overrides and isolates
# U+202A-U+202E, U+2066-U+2069) are invisible: a key split by one still works
# when pasted, so they are dropped before scanning; NFKC folds full-width
# look-alikes to ASCII.
_INVISIBLE = {ord(c): None for c in ("\u00ad", "\u180e", "\u200b", "\u200c", "\u200d",
                                      "\u200e", "\u200f", "\u2060", "\u2061", "\u2062",
                                      "\u2063", "\u2064", "\ufeff",
                                      "\u202a", "\u202b", "\u202c", "\u202d", "\u202e",
                                      "\u2066", "\u2067", "\u2068", "\u2069")}


# What the secret scan drops before it looks: every default-ignorable code
# point, by the Unicode property (not a list that misses U+034F, variation
# selectors, tags, Hangul fillers, Mongolian free variation selectors, …):
# renderers show nothing for them, so a credential split by one still reads,
# and pastes, as the credential.
_IGNORABLE = regex.compile(r"\p{Default_Ignorable_Code_Point}+")


def looks_like_secret(text: str) -> bool:
    if _scan(text):
        return True
    if text.isascii():
        return False  # NFKC, the invisible characters and look-alikes change nothing here
    seen = {text}
    for folded in folds(text):
        if folded not in seen:
            if _scan(folded):
                return True
            seen.add(folded)
    return False


def _normalized(text: str) -> str:
    # Dropped before NFKC and after it: NFKC maps some ignorables (U+3164) to
    # other ignorables (U+1160).
    return _IGNORABLE.sub("", unicodedata.normalize("NFKC", _IGNORABLE.sub("", text)))


def folds(text: str) -> Iterator[str]:
    """The forms of a text that is not ASCII the scan also looks at, cheapest
    first: without invisible characters and in NFKC; then with every
    look-alike of an ASCII character (Cyrillic dze, Greek Iota, small
    capitals, the Kelvin sign, every dash and minus sign) in the ASCII it
    imitates, by Unicode's confusables (``ledger.domain.confusables``), once
    per reading of the look-alikes that imitate several (Greek Iota is "I",
    "l", "1" or "|"). Folded before NFKC and after it: NFKC turns the
    Kelvin sign into "K" and so loses its other reading, "k"."""
    yield _normalized(text)
    for reading in confusables.readings(text):
        yield _refolded(reading)


def _refolded(folded: str) -> str:
    normalized = _normalized(folded)
    # Folding again only what NFKC made (U+1D6A8, a mathematical Alpha, is a
    # Greek Alpha by NFKC): a fold leaves nothing to fold.
    return normalized if normalized == folded else confusables.fold(normalized)


def any_secret(texts: Iterable[object]) -> bool:
    """Whether any of a command's texts may hold a credential, in one scan.

    The texts are scanned joined by newlines. A match inside one text is a
    match inside the joined text too (a newline is a non-word character, as
    a text's start and end are, for the patterns' ``\b``; NFKC and the
    invisible characters fold each text alone), so False means none holds
    one. True can also come from a match across two texts and only means
    "look at each": ``text(..., scan=True)`` then names the field, in the
    order it always did. One pass instead of one per text is most of the
    validation of a checkpoint, which has six texts or more."""
    strings = [t for t in texts if isinstance(t, str)]
    joined = "\n".join(strings)
    if looks_like_secret(joined):
        return True
    if joined.isascii() or confusables.every_reading(joined):
        return False
    # The texts together hold more classes of look-alikes than the scan
    # reads in every combination; one text alone may hold few enough.
    return any(looks_like_secret(t) for t in strings)


def encodes(value: str) -> bool:
    """Whether ``value`` is valid UTF-8 text: false only for a lone surrogate
    (what JSON's "\\ud800" escape decodes to), which no UTF-8 column stores."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def text(value: object, field: str, *, limit: int, required: bool = False,
         scan: bool = True) -> str:
    """``value`` checked as a text field; ``scan=False`` when ``any_secret``
    already cleared it with the command's other texts."""
    if not isinstance(value, str):
        raise InvalidCommand(f"{field} must be a string.", field=field)
    if required and not value.strip():
        raise InvalidCommand(f"{field} must not be empty.", field=field)
    if len(value) > limit:
        raise InvalidCommand(f"{field} is longer than {limit} characters.", field=field)
    if "\x00" in value:
        raise InvalidCommand(f"{field} contains a NUL character.", field=field)
    if not value.isascii() and not encodes(value):
        # A lone surrogate (JSON's "\ud800" escape decodes to one) cannot be
        # stored in any UTF-8 column or hashed as UTF-8.
        raise InvalidCommand(f"{field} contains a lone surrogate character.", field=field)
    if scan and looks_like_secret(value):
        raise InvalidCommand(
            f"{field} looks like it contains a credential; secrets never enter the ledger.",
            field=field,
        )
    return value


def text_list(values: object, field: str, *, limit: int = MAX_ITEM,
              max_items: int = MAX_ITEMS, scan: bool = True) -> list[str]:
    if not isinstance(values, list | tuple):
        raise InvalidCommand(f"{field} must be a list of strings.", field=field)
    if len(values) > max_items:
        raise InvalidCommand(f"{field} has more than {max_items} items.", field=field)
    if not scan:
        # Already cleared by any_secret: what ``text`` checks, without naming
        # each item ("next_actions[3]") unless one fails, and then ``text``
        # says which, as it always did.
        for v in values:
            if not (isinstance(v, str) and len(v) <= limit and v.isascii() and "\x00" not in v):
                break
        else:
            return list(values)
    return [text(v, f"{field}[{i}]", limit=limit, scan=scan) for i, v in enumerate(values)]


def progress(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidCommand("progress_pct must be a whole number.", field="progress_pct")
    if not 0 <= value <= 100:
        raise InvalidCommand("progress_pct must be between 0 and 100.", field="progress_pct")
    return value


def sha256(value: object, field: str) -> str:
    if not isinstance(value, str) or not _SHA256.fullmatch(value):
        raise InvalidCommand(f"{field} must be 64 lowercase hex digits.", field=field)
    return value


def byte_count(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidCommand(f"{field} must be a whole number of bytes, 0 or more.", field=field)
    return value


def canonical_workspace(path: str) -> str:
    """One spelling per workspace, so a binding cannot be dodged with a
    trailing slash or a ``..``: filesystem paths are normalised, anything
    else (a repository URL, a project name) only loses surrounding blanks and
    trailing slashes."""
    value = path.strip() if isinstance(path, str) else path
    if not isinstance(value, str):
        return value
    if not value.isascii():
        # An invisible character (a zero-width space pasted with the path) or
        # another Unicode spelling of the same letters (NFC) is the same
        # workspace to the person reading it: one binding, not two.
        value = unicodedata.normalize("NFC", value.translate(_INVISIBLE)).strip()
    if value.startswith(("/", "~")):
        value = posixpath.normpath(value)
        if value.startswith("//"):
            value = "/" + value.lstrip("/")
        return value
    return value.rstrip("/") or value


# The instants an agent may send (a wake's ``at``, a receipt's ``due_at``).
# Python's datetime ends at 9999-12-31, and the rules add intervals to these
# instants (slots, leases, back-off of at most a day), so the last accepted
# year leaves one of headroom; nothing scheduled lies before the Unix epoch.
EARLIEST_INSTANT = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_INSTANT = datetime(9999, 1, 1, tzinfo=UTC)
TIME_OUT_OF_RANGE = "time_out_of_range"


def instant(value: object, field: str) -> str:
    """An ISO 8601 date-time with an offset, as the ledger stores it (UTC,
    microseconds), or a refusal: ``validation_error`` for what is not one,
    ``time_out_of_range`` for one outside [1970, 9999) in UTC."""
    try:
        moment = datetime.fromisoformat(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidCommand(f"{field} must be an ISO 8601 date-time", field=field) from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise InvalidCommand(f"{field} must carry a time zone offset", field=field)
    try:
        in_range = EARLIEST_INSTANT <= moment < LATEST_INSTANT
    except OverflowError:  # its UTC form lies outside the years 1-9999
        in_range = False
    if not in_range:
        raise InvalidCommand(f"{field} must lie between {iso(EARLIEST_INSTANT)} and "
                             f"{iso(LATEST_INSTANT)}", field=field, code=TIME_OUT_OF_RANGE)
    return iso(moment)

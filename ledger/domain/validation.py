"""Shape and size rules for what agents send. Pure: no Django here.

The API validates the same limits first to answer per field, but these are the
authority: a command that reaches ``decide`` from anywhere (CLI, admin,
scheduler) is checked again.
"""

import posixpath
import re

from ledger.domain.errors import InvalidCommand

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
# One alternation, so each text is scanned once.
_SECRET = re.compile("|".join((
    r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}",  # OpenAI / Anthropic keys
    r"\bgh[pousr]_[A-Za-z0-9]{30,}",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{30,}",
    r"\bAKIA[0-9A-Z]{16}\b",  # AWS access key id
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",  # Slack
    r"\bAIza[0-9A-Za-z_-]{35}\b",  # Google API key
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
    r"\bBearer\s+[A-Za-z0-9._~+/=-]{20,}",
    r"\bwl_[A-Za-z0-9]{8}_[A-Za-z0-9_-]{20,}",  # our own API tokens
)))


def looks_like_secret(text: str) -> bool:
    return _SECRET.search(text) is not None


def text(value: object, field: str, *, limit: int, required: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidCommand(f"{field} must be a string.", field=field)
    if required and not value.strip():
        raise InvalidCommand(f"{field} must not be empty.", field=field)
    if len(value) > limit:
        raise InvalidCommand(f"{field} is longer than {limit} characters.", field=field)
    if "\x00" in value:
        raise InvalidCommand(f"{field} contains a NUL character.", field=field)
    if looks_like_secret(value):
        raise InvalidCommand(
            f"{field} looks like it contains a credential; secrets never enter the ledger.",
            field=field,
        )
    return value


def text_list(values: object, field: str, *, limit: int = MAX_ITEM,
              max_items: int = MAX_ITEMS) -> list[str]:
    if not isinstance(values, list | tuple):
        raise InvalidCommand(f"{field} must be a list of strings.", field=field)
    if len(values) > max_items:
        raise InvalidCommand(f"{field} has more than {max_items} items.", field=field)
    return [text(v, f"{field}[{i}]", limit=limit) for i, v in enumerate(values)]


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
    if value.startswith(("/", "~")):
        value = posixpath.normpath(value)
        if value.startswith("//"):
            value = "/" + value.lstrip("/")
        return value
    return value.rstrip("/") or value

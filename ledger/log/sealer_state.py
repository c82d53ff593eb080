"""The sealer's memory outside the database: its latest signed checkpoint.

A database administrator can delete heads and leaves, rewrite events and let
the sealer sign again with the real key; nothing in the database remembers
what was signed before. This file does: the latest checkpoint the sealer
signed, kept beside the signing key (mode 0600, replaced atomically), so the
sealer never signs a head that does not extend it (sealing.py) and
``verify --against`` holds the database to it (log_audit.py).

An inconsistency is an alarm, never a new head: ``LogInconsistent`` is raised,
logged at ERROR, and remembered in ``<state>.alarm`` until a consistent head
is signed again; ``inconsistency_alarm()`` is what a metrics collector or a
health check reads.
"""

import contextlib
import json
import logging
import os
from pathlib import Path

from django.conf import settings

from wakeledger_verify import notes

logger = logging.getLogger(__name__)


class LogInconsistent(Exception):
    """The tree as stored does not extend the sealer's latest signed checkpoint."""


def path() -> Path | None:
    configured = settings.WAKELEDGER_SEALER_STATE_FILE
    if configured == "off":
        return None
    if configured:
        return Path(configured)
    key = Path(settings.WAKELEDGER_SIGNING_KEY_FILE)
    return key.with_name(key.name + ".checkpoint")


def read_note() -> str | None:
    where = path()
    if where is None or not where.exists():
        return None
    return where.read_text(encoding="utf-8")


def read() -> notes.Checkpoint | None:
    """The sealer's latest signed checkpoint (its own file: not re-verified)."""
    note = read_note()
    if note is None:
        return None
    try:
        return notes.parse_checkpoint(notes.split(note)[0])
    except notes.NoteError as error:
        raise LogInconsistent(f"the sealer's record {path()} is damaged: {error}") from None


def write(note: str) -> None:
    where = path()
    if where is None:
        return
    _write_private(where, note)


def _write_private(where: Path, text: str) -> None:
    """Replace ``where`` atomically with a 0600 file (never a half-written one)."""
    where.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = where.with_name(f".{where.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with open(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, where)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _alarm_path() -> Path | None:
    where = path()
    return None if where is None else where.with_name(where.name + ".alarm")


def raise_alarm(message: str) -> LogInconsistent:
    """Log and remember an inconsistency; the exception to raise."""
    logger.error("ALARM: the verifiable log is inconsistent with the sealer's record; no "
                 "head signed: %s", message)
    where = _alarm_path()
    if where is not None:
        try:
            _write_private(where, message + "\n")
        except OSError as error:
            logger.error("could not record the log alarm in %s: %s", where, error)
    return LogInconsistent(message)


def clear_alarm() -> None:
    where = _alarm_path()
    if where is not None:
        with contextlib.suppress(FileNotFoundError):
            where.unlink()


def inconsistency_alarm() -> str | None:
    """Why the sealer last refused to sign (the tree did not extend its record),
    or None while it signs normally. For a metrics collector, the doctor, alerts."""
    where = _alarm_path()
    if where is None:
        return None
    try:
        return where.read_text(encoding="utf-8").strip() or "inconsistent"
    except FileNotFoundError:
        return None


# The rolling comparison's place (ledger/log/leafcheck.py): where the next
# window begins and the positions last found wrong. Beside the record, so a
# rewrite of the database cannot move it; in memory when the record is off.
_rolling_in_memory: dict[str, object] = {"cursor": 0, "suspects": []}


def _rolling_path() -> Path | None:
    where = path()
    return None if where is None else where.with_name(where.name + ".rolling")


def read_rolling() -> tuple[int, list[int]]:
    """(cursor, suspect positions); a missing or damaged file starts at 0."""
    where = _rolling_path()
    found: object = _rolling_in_memory
    if where is not None:
        try:
            found = json.loads(where.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            found = {}
    if not isinstance(found, dict):
        found = {}
    cursor, suspects = found.get("cursor", 0), found.get("suspects", [])
    if not isinstance(cursor, int) or isinstance(cursor, bool):
        cursor = 0
    if not isinstance(suspects, list):
        suspects = []
    return cursor, [p for p in suspects if isinstance(p, int) and not isinstance(p, bool)]


def write_rolling(cursor: int, suspects: list[int]) -> None:
    state = {"cursor": cursor, "suspects": suspects}
    where = _rolling_path()
    if where is None:
        _rolling_in_memory.update(state)
        return
    try:
        _write_private(where, json.dumps(state) + "\n")
    except OSError as error:  # the next run starts its window where this one did
        logger.warning("could not keep the rolling comparison's cursor in %s: %s", where, error)

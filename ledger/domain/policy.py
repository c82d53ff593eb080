"""A goal's policy and session, with their defaults and limits."""

from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ledger.domain import validation
from ledger.domain.errors import InvalidCommand

# The server's policy, set by operators (ledger/settings.py takes its
# defaults and bounds from here: WAKELEDGER_STALE_GRACE_SECONDS,
# WAKELEDGER_RESET_MARGIN_SECONDS).
#
# Rule 2: a holder whose lease is past its expiry by more than this may be
# taken over. A live lease is never stolen.
LEASE_STALE_GRACE_SECONDS = 60
# Rule 4: the safety margin after a provider's reset time before the goal
# resumes (the reset instant itself is clamped to ledger.domain.resets.RESET_HORIZON).
RESET_MARGIN_SECONDS = 120
RESET_MARGIN_RANGE = (0, 3600)

DEFAULT_POLICY: dict[str, Any] = {
    "lease_seconds": 600,
    "cadence_minutes": 60,
    "max_continuations": 3,
    "max_wake_retries": 5,
    "scheduler": "internal",
    "dispatch": "none",
    # Set by the server (WAKELEDGER_STALE_GRACE_SECONDS), not by agents; frozen
    # into goal.started so replay always uses the grace the goal ran with.
    "stale_grace_seconds": LEASE_STALE_GRACE_SECONDS,
    # Liveness deadlines (DESIGN section 6, ledger.domain.liveness): missed host
    # slots before HOST_SILENT, how long a due wake waits for its agent's pull
    # before READY_UNCLAIMED, and how long a blocking job may go unreported
    # before JOB_SILENT.
    "host_silent_slots": 2,
    "ready_timeout_minutes": 120,
    "job_deadline_minutes": 360,
}

# name -> (minimum, maximum) for the whole-number settings
RANGES = {
    "lease_seconds": (5, 86_400),
    "cadence_minutes": (1, 1_440),
    "max_continuations": (0, 100),
    "max_wake_retries": (0, 100),
    "stale_grace_seconds": (0, 600),
    "host_silent_slots": (1, 100),
    "ready_timeout_minutes": (1, 10_080),
    "job_deadline_minutes": (1, 43_200),
}
SCHEDULERS = ("internal", "host")
SESSION_FIELDS = ("agent_id", "session_key", "session_id", "model", "timezone")


def whole(value: object, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidCommand(f"{field} must be a whole number.", field=field)
    if not low <= value <= high:
        raise InvalidCommand(f"{field} must be between {low} and {high}.", field=field)
    return value


def policy(given: dict[str, Any], dispatchers: frozenset[str] | None = None,
           cadence_unit_seconds: int = 60) -> dict[str, Any]:
    unknown = set(given) - set(DEFAULT_POLICY)
    if unknown:
        name = sorted(unknown)[0]
        raise InvalidCommand(f"policy.{name} is not a policy setting.", field=f"policy.{name}")
    result = {**DEFAULT_POLICY, **given}
    for name, (low, high) in RANGES.items():
        result[name] = whole(result[name], f"policy.{name}", low, high)
    if result["scheduler"] not in SCHEDULERS:
        raise InvalidCommand(f"policy.scheduler must be one of {', '.join(SCHEDULERS)}.",
                             field="policy.scheduler")
    # The watchdog's interval, frozen into the goal: whole minutes, because
    # django-q2 schedules have minute resolution (and look every 30 s), so a
    # shorter or fractional interval would be promised and never kept.
    seconds = result["cadence_minutes"] * cadence_unit_seconds
    result["interval_seconds"] = max(60, -(-seconds // 60) * 60)
    result["dispatch"] = validation.text(result["dispatch"], "policy.dispatch", limit=64,
                                         required=True)
    # Dispatchers are configured by operators, never by agents: a goal only
    # names one, and an unknown name is refused. The message does not list the
    # configured names: they describe the operator's infrastructure.
    if dispatchers is not None and result["dispatch"] not in dispatchers | {"none"}:
        raise InvalidCommand(f"policy.dispatch {result['dispatch']!r} is not a dispatcher "
                             "of this server.", field="policy.dispatch")
    return result


def session(given: dict[str, Any]) -> dict[str, Any]:
    unknown = set(given) - set(SESSION_FIELDS)
    if unknown:
        name = sorted(unknown)[0]
        raise InvalidCommand(f"session.{name} is not a session field.", field=f"session.{name}")
    result = {name: validation.text(given.get(name, ""), f"session.{name}",
                                    limit=validation.MAX_KEY)
              for name in SESSION_FIELDS if name in given}
    if result.get("timezone"):
        result["timezone"] = timezone(result["timezone"], "session.timezone")
    return result


def timezone(name: str, field: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidCommand(f"{field} {name!r} is not an IANA time zone.", field=field) from None
    return name


def interval_minutes(interval_seconds: int) -> int:
    """A frozen watchdog interval in the whole minutes a scheduler row (or a
    host's schedule) is written in: exact, since ``policy`` rounded it up."""
    return max(1, interval_seconds // 60)

"""A goal's policy and session, with their defaults and limits."""

from collections.abc import Mapping
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ledger.domain import validation
from ledger.domain.errors import InvalidCommand

# The server's policy, set by operators (ledger/project/settings.py takes its
# defaults and bounds from here: WAKELEDGER_STALE_GRACE_SECONDS,
# WAKELEDGER_RESET_MARGIN_SECONDS).
#
# The lease rule: a holder whose lease is past its expiry by more than this may be
# taken over. A live lease is never stolen.
LEASE_STALE_GRACE_SECONDS = 60
# The failure rule: the safety margin after a provider's reset time before the goal
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
    # Liveness deadlines (docs/design.md, "Wakes and claims", ledger.domain.liveness): missed host
    # slots before HOST_SILENT, how long a due wake waits for its agent's pull
    # before READY_UNCLAIMED, and how long a blocking job may go unreported
    # before JOB_SILENT.
    "host_silent_slots": 2,
    "ready_timeout_minutes": 120,
    "job_deadline_minutes": 360,
    # The progress deadline: how long a goal may go without a
    # checkpoint while its agent holds the lease (or, without a lease, beyond
    # one watchdog interval) before it is listed NO_PROGRESS. Smart-wake's
    # chunks are 5-15 minutes of work, each ended by a checkpoint: an hour
    # without one is four chunks missed.
    "progress_minutes": 60,
    # How long a pause to a reset further away may last before it is listed
    # LONG_PAUSE for a person (a weekly limit, "try again on Jan 3"): a day.
    # Set by the server (WAKELEDGER_LONG_PAUSE_MINUTES), not by agents, and
    # frozen into goal.started like the stale grace.
    "long_pause_minutes": 1_440,
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
    "progress_minutes": (1, 1_440),
    "long_pause_minutes": (1, 43_200),
}

# Operator caps: the longest an agent may make each duration that
# hides a dead holder, host or job from every list, and the most of each
# count that keeps a goal going without a person. RANGES say what a value
# may be at all; a cap says how long this server lets a goal stay silent.
# ledger/project/settings.py reads them from WAKELEDGER_MAX_* (bounded by RANGES);
# a value over its cap is refused (``over_cap``), never silently clamped: an
# agent that asked for a day-long lease must learn it does not have one.
DEFAULT_CAPS: dict[str, int] = {
    "lease_seconds": 3_600,
    "cadence_minutes": 1_440,
    # host_silent_slots x cadence_minutes: how long a host may stay silent.
    "host_silence_minutes": 2_880,
    "ready_timeout_minutes": 1_440,
    "job_deadline_minutes": 1_440,
    "progress_minutes": 240,
    # Counts an agent chooses are caps too: continuations a rate limit
    # spends before the goal is listed, and wakes without progress before
    # they stop (100 of either kept a goal unlisted for months).
    "max_continuations": 10,
    "max_wake_retries": 10,
}
# The resume policy (docs/agents.md, "Resume policy"): settings a goal has
# only when given, so the policy every other goal stores is unchanged.
# resume: auto (a wake continues at the reset), ask (a person approves each
# reset's continuation), quiet_hours (no continuation inside the window; the
# wake waits for its end). host_continues: the agent's host continues the
# session by itself at a reset (Claude Code's autoContinueAtUsageLimit): the
# reset's wake waits host_grace_minutes for it first.
RESUME_POLICIES = ("auto", "ask", "quiet_hours")
RESUME_SETTINGS: dict[str, Any] = {"resume": "auto", "quiet_hours": {}, "host_continues": False,
                                   "host_grace_minutes": 10}
HOST_GRACE_RANGE = (1, 120)
OVER_CAP = "over_cap"
SCHEDULERS = ("internal", "host")
SESSION_FIELDS = ("agent_id", "session_key", "session_id", "model", "timezone", "binds")
# What a goal holds exclusively among its agent's active goals: its workspace
# (the default: one goal works in one folder), or its session, for a host whose
# sessions all share one workspace (an OpenClaw agent): each session is then its
# own goal, and only its session key is exclusive (docs/agents.md §2).
BINDS = ("workspace", "session")


def whole(value: object, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidCommand(f"{field} must be a whole number.", field=field)
    if not low <= value <= high:
        raise InvalidCommand(f"{field} must be between {low} and {high}.", field=field)
    return value


def policy(given: dict[str, Any], dispatchers: frozenset[str] | None = None,
           cadence_unit_seconds: int = 60,
           caps: Mapping[str, int] | None = None) -> dict[str, Any]:
    unknown = set(given) - set(DEFAULT_POLICY) - set(RESUME_SETTINGS)
    if unknown:
        name = sorted(unknown)[0]
        raise InvalidCommand(f"policy.{name} is not a policy setting.", field=f"policy.{name}")
    result = {**DEFAULT_POLICY, **given, **resume_policy(given)}
    for name, (low, high) in RANGES.items():
        result[name] = whole(result[name], f"policy.{name}", low, high)
    _within_caps(result, given, DEFAULT_CAPS if caps is None else caps)
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


def _within_caps(result: dict[str, Any], given: dict[str, Any],
                 caps: Mapping[str, int]) -> None:
    """Refuse a duration over the server's cap (``over_cap``, naming the cap).
    A default is never refused: the server's defaults lie within its caps or
    the operator set a cap below a default on purpose and is told at start-up
    (ledger/project/settings.py checks it)."""
    for name in ("lease_seconds", "cadence_minutes", "ready_timeout_minutes",
                 "job_deadline_minutes", "progress_minutes", "max_continuations",
                 "max_wake_retries"):
        cap = caps.get(name)
        if cap is not None and name in given and result[name] > cap:
            raise InvalidCommand(f"policy.{name} {result[name]} is over this server's cap "
                                 f"of {cap}.", field=f"policy.{name}", code=OVER_CAP,
                                 cap=cap, cap_name=name)
    cap = caps.get("host_silence_minutes")
    silence = result["host_silent_slots"] * result["cadence_minutes"]
    if (cap is not None and result["scheduler"] == "host"
            and {"host_silent_slots", "cadence_minutes"} & set(given) and silence > cap):
        field = "host_silent_slots" if "host_silent_slots" in given else "cadence_minutes"
        raise InvalidCommand(
            f"policy.host_silent_slots x policy.cadence_minutes is {silence} minutes, over "
            f"this server's cap of {cap} minutes of host silence.", field=f"policy.{field}",
            code=OVER_CAP, cap=cap, cap_name="host_silence_minutes")


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
    if "binds" in result:
        if result["binds"] not in BINDS:
            raise InvalidCommand(f"session.binds must be one of {', '.join(BINDS)}.",
                                 field="session.binds")
        if result["binds"] == "session" and not result.get("session_key"):
            raise InvalidCommand("session.binds session needs the session's session_key.",
                                 field="session.session_key")
    return result


def binds_session(session: Mapping[str, Any]) -> bool:
    """Whether a goal with this session holds its session, not its workspace."""
    return session.get("binds") == "session"


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


def resume_policy(given: Mapping[str, Any]) -> dict[str, Any]:
    """The resume settings given, checked (only those given are kept)."""
    result: dict[str, Any] = {}
    if "resume" in given:
        if given["resume"] not in RESUME_POLICIES:
            raise InvalidCommand(f"policy.resume must be one of {', '.join(RESUME_POLICIES)}.",
                                 field="policy.resume")
        result["resume"] = given["resume"]
    if "host_continues" in given:
        if not isinstance(given["host_continues"], bool):
            raise InvalidCommand("policy.host_continues must be true or false.",
                                 field="policy.host_continues")
        result["host_continues"] = given["host_continues"]
    if "host_grace_minutes" in given:
        result["host_grace_minutes"] = whole(given["host_grace_minutes"],
                                             "policy.host_grace_minutes", *HOST_GRACE_RANGE)
    if "quiet_hours" in given:
        result["quiet_hours"] = quiet_hours(given["quiet_hours"])
    if result.get("resume", given.get("resume")) == "quiet_hours" and not result.get("quiet_hours"):
        raise InvalidCommand('policy.resume "quiet_hours" needs policy.quiet_hours '
                             '{"start": "HH:MM", "end": "HH:MM", "timezone": ZONE}.',
                             field="policy.quiet_hours")
    return result


def quiet_hours(given: object) -> dict[str, str]:
    """``{"start": "22:00", "end": "07:00", "timezone": "Europe/Paris"}``: local
    times (the window may cross midnight); the zone defaults to the session's."""
    field = "policy.quiet_hours"
    if not isinstance(given, dict) or set(given) - {"start", "end", "timezone"} \
            or not {"start", "end"} <= set(given):
        raise InvalidCommand(f"{field} must be {{\"start\": \"HH:MM\", \"end\": \"HH:MM\"}} "
                             "and optionally \"timezone\".", field=field)
    result = {}
    for name in ("start", "end"):
        value = given[name]
        if not (isinstance(value, str) and len(value) == 5 and value[2] == ":"
                and value[:2].isdigit() and value[3:].isdigit()
                and int(value[:2]) < 24 and int(value[3:]) < 60):
            raise InvalidCommand(f"{field}.{name} must be a local time HH:MM.",
                                 field=f"{field}.{name}")
        result[name] = value
    if result["start"] == result["end"]:
        raise InvalidCommand(f"{field}: start and end must differ.", field=field)
    if "timezone" in given:
        if not isinstance(given["timezone"], str):
            raise InvalidCommand(f"{field}.timezone must be an IANA time zone.",
                                 field=f"{field}.timezone")
        result["timezone"] = timezone(given["timezone"], f"{field}.timezone")
    return result

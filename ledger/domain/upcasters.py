"""Older stored shapes of event kinds, turned into the current ones on read.

The stored JSON of an event is hashed into its goal's chain and the Merkle
log, so it is never rewritten: when a kind's shape changes, its class's
version goes up and an upcaster here turns the older stored shape into the
newer one whenever it is decoded (``ledger.domain.codec``). ``verify`` keeps
hashing the stored JSON; replay, the folds and every reader see only the
current shape, so no compatibility ``.get(key, default)`` is left in them.

No stored event carries a version number, so each kind with older shapes
says how to tell them apart (``versioned_by``): by a key the older shape
lacks. (A future change that no key tells apart would store a version key
in its new shape; its ``versioned_by`` would read it, defaulting to the last
shape without one.)
"""

from collections.abc import Callable, Mapping
from typing import Any

from ledger.domain.claimed import WakeClaimed
from ledger.domain.codec import upcaster, versioned_by
from ledger.domain.endings import GoalBlocked, GoalCompleted, GoalFailed
from ledger.domain.goals import CheckpointRecorded, GoalStarted
from ledger.domain.leases import LeaseAcquired, LeaseTakenOver
from ledger.domain.watchdogs import ReceiptRecorded, WakeScheduled

CHECKPOINT_RECORDED, GOAL_STARTED = CheckpointRecorded.KIND, GoalStarted.KIND
GOAL_BLOCKED, GOAL_COMPLETED, GOAL_FAILED = GoalBlocked.KIND, GoalCompleted.KIND, GoalFailed.KIND
LEASE_ACQUIRED, LEASE_TAKEN_OVER = LeaseAcquired.KIND, LeaseTakenOver.KIND
RECEIPT_RECORDED, WAKE_SCHEDULED = ReceiptRecorded.KIND, WakeScheduled.KIND
WAKE_CLAIMED = WakeClaimed.KIND

# ---------------------------------------------------------------- repairs' attempt
#
# Version 1: a repair event (``wake.scheduled`` or ``receipt.recorded`` with
# ``repair``) recorded before repairs were bounded has no ``attempt``,
# the count of repairs since its wake last fired. Version 2 always has it.
# Such a repair counts as one: the bound (MAX_REPAIRS) then starts from it
# as the release that wrote it would have (it repaired forever).


def _repair_version(data: Mapping[str, Any]) -> int:
    # An orphaned row's receipt is no repair of a wake: it never counts one.
    repair = data.get("repair")
    return 1 if repair and repair != "orphaned" and "attempt" not in data else 2


def _first_repair(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "attempt": 1}


for _kind in (WAKE_SCHEDULED, RECEIPT_RECORDED):
    versioned_by(_kind)(_repair_version)
    upcaster(_kind, from_version=1)(_first_repair)


# ---------------------------------------------------------------- leases' via
#
# Version 1: a lease granted before automatic continuations existed has no
# ``via``; every lease then was the agent's own. Version 2 always says who it
# was granted to (agent, wake or pull: the uncertain-attempt rule watches the last two).


def _via_version(data: Mapping[str, Any]) -> int:
    return 1 if "via" not in data else 2


def _granted_to_the_agent(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "via": "agent"}


for _kind in (LEASE_ACQUIRED, LEASE_TAKEN_OVER):
    versioned_by(_kind)(_via_version)
    upcaster(_kind, from_version=1)(_granted_to_the_agent)


# ---------------------------------------------------------------- before leases
#
# Version 1: what the first commits wrote (2026-12-02, before fenced leases,
# policies and sessions came in commit 748065c). A goal.started had no
# ``policy``, ``session``, ``timeout_seconds`` or ``estimated_duration_seconds``:
# it reads as a goal that named none of them (policy and session empty, so
# ``GoalState.setting`` gives every default; no timeout, no estimate). A
# checkpoint and a goal's end (completed, failed, blocked) had no
# ``generation``, the lease generation they were written under: no lease
# existed yet, so it is 0, the generation of a goal never leased.


def _missing(key: str) -> Callable[[Mapping[str, Any]], int]:
    def version(data: Mapping[str, Any]) -> int:
        return 1 if key not in data else 2

    return version


def _started_without_policy(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "policy": {}, "session": {}, "timeout_seconds": None,
            "estimated_duration_seconds": None}


def _never_leased(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "generation": 0}


versioned_by(GOAL_STARTED)(_missing("policy"))
upcaster(GOAL_STARTED, from_version=1)(_started_without_policy)
for _kind in (CHECKPOINT_RECORDED, GOAL_COMPLETED, GOAL_FAILED, GOAL_BLOCKED):
    versioned_by(_kind)(_missing("generation"))
    upcaster(_kind, from_version=1)(_never_leased)


# ---------------------------------------------------------------- claims' kind
#
# Version 1: a wake's claim recorded before one-off wakes had kinds (commits
# aeb1e4b to 790fa7d, 2026-12-02) has no ``kind``. Every claim then was
# decided as a watchdog's recurring wake is now (the claim command had no
# kind), so it reads as ``recurring``.


def _recurring(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "kind": "recurring"}


versioned_by(WAKE_CLAIMED)(_missing("kind"))
upcaster(WAKE_CLAIMED, from_version=1)(_recurring)

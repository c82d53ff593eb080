"""Older stored shapes of event kinds, turned into the current ones on read.

The stored JSON of an event is hashed into its goal's chain and the Merkle
log, so it is never rewritten: when a kind's shape changes, its class's
version goes up and an upcaster here turns the older stored shape into the
newer one whenever it is decoded (``ledger.domain.codec``). ``verify`` keeps
hashing the stored JSON; replay, the evolvers and every reader see only the
current shape, so no compatibility ``.get(key, default)`` is left in them.

No stored event carries a version number, so each kind with older shapes
says how to tell them apart (``versioned_by``): by a key the older shape
lacks. (A future change that no key tells apart would store a version key
in its new shape; its ``versioned_by`` would read it, defaulting to the last
shape without one.)
"""

from collections.abc import Mapping
from typing import Any

from ledger.domain.codec import upcaster, versioned_by
from ledger.domain.events import LEASE_ACQUIRED, LEASE_TAKEN_OVER, RECEIPT_RECORDED, WAKE_SCHEDULED

# ---------------------------------------------------------------- repairs' attempt
#
# Version 1: a repair event (``wake.scheduled`` or ``receipt.recorded`` with
# ``repair``) recorded before issue 35 bounded repairs has no ``attempt``,
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
# was granted to (agent, wake or pull: rule 6 watches the last two).


def _via_version(data: Mapping[str, Any]) -> int:
    return 1 if "via" not in data else 2


def _granted_to_the_agent(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "via": "agent"}


for _kind in (LEASE_ACQUIRED, LEASE_TAKEN_OVER):
    versioned_by(_kind)(_via_version)
    upcaster(_kind, from_version=1)(_granted_to_the_agent)

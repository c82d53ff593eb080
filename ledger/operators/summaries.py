"""One readable line per event: ``summary(kind, data)``, in plain text.

The terminal (`ledger show`, one ``event_line`` per event), the admin's
timeline and its event list show the same words, which each kind writes
itself (its payload's ``line``, ``ledger.domain.kinds``). Everything here may
come from an agent, so it goes through ``ledger.domain.text.clean``: one
line, no control characters.
"""

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ledger.domain.codec import decode_or_none
from ledger.domain.kinds import GOAL_COMPLETED, GoalCompleted
from ledger.domain.text import clean
from ledger.operators.colours import icon_of, kind_colour, paint
from ledger.operators.terminal import when

# Each kind writes its own line (its payload's ``line``, declared with the
# kind): the stored data is decoded (and upcast) by the codec first, so a
# line reads attributes, never string keys.


def evidence_lines(data: Mapping[str, Any]) -> list[str]:
    """`ledger show`'s block for a completed goal (the stored data of its
    goal.completed): each criterion and its evidence in full (one safe line each)."""
    completion = decode_or_none(GOAL_COMPLETED, data)
    items = completion.evidence if isinstance(completion, GoalCompleted) else None
    items = [i for i in items if isinstance(i, Mapping)] if isinstance(items, list) else []
    if not items:
        return [f"{'evidence:':<15}none recorded (no done criteria)"]
    return [f"{'evidence:' if n == 0 else '':<15}“{clean(i.get('criterion', '?'))}” ⇒ "
            f"{clean(i.get('evidence', ''))}" for n, i in enumerate(items)]


# Never worth a line: digests, and the data a summary already says elsewhere.
_GENERIC_SKIP = frozenset({"token_sha256", "host_ref_sha256", "notify_sha256"})


def summary(kind: str, data: Mapping[str, Any]) -> str:
    """One readable line for an event's stored data, in plain text (no colour,
    no markup).

    The data is decoded into its payload (older shapes upcast) and its kind
    writes the line. Whatever does not decode (a kind this release does not
    know, a damaged row) falls back to ``key=value`` pairs: a summary never raises.
    """
    data = data if isinstance(data, Mapping) else {}
    payload = decode_or_none(kind, data, partial=True)
    if payload is not None:
        try:
            return clean(payload.line())
        except (KeyError, TypeError, ValueError, AttributeError, NotImplementedError):
            pass  # a nested value of an unexpected shape
    return clean(", ".join(f"{k}={v}" for k, v in sorted(data.items())
                           if k not in _GENERIC_SKIP), 160)


# One line per event, for `ledger show`.

KIND_WIDTH = 23  # len("continuation.dispatched"), the longest kind
ACTOR_WIDTH = 14


def event_line(seq: int, recorded_at: datetime, kind: str, actor: str,
               data: Mapping[str, Any], *, colour: bool = False) -> str:
    """``seq  time  icon kind  actor  summary``: one line per event."""
    head = f"{icon_of(kind)} {clean(kind, KIND_WIDTH):<{KIND_WIDTH}}"
    return (f"{seq:>7}  {paint(when(recorded_at), 'dim', colour)}  "
            f"{paint(head, kind_colour(kind), colour)}  "
            f"{clean(actor, ACTOR_WIDTH):<{ACTOR_WIDTH}}  {summary(kind, data)}")

"""The rolling comparison of sealed events with their stored leaves.

A leaf's hash is the hash of its event's record as it was when sealed
(wakeledger_verify.records). An administrator who rewrites a sealed event by
SQL, and recomputes the goal's hash chain with the formula in
docs/integrity.md, leaves every chain whole; only the stored leaf still
holds the truth. ``verify --against`` recomputes every leaf, which costs a
pass over the whole log; this check is cheap enough for every sealer run and
every ``ledger doctor``:

- a window of ``WINDOW`` leaves from a cursor that moves on each run and
  wraps at the tree's end (over ``size / WINDOW + 1`` runs every leaf has been
  compared at least once);
- the ``NEWEST`` newest leaves, every run (a rewrite of recent history is the
  likeliest and is found at the next run);
- every position a run found wrong, every run, until it matches again: the
  alarm it raised does not clear because the cursor moved on.

``plan`` is the rule (which positions a run compares), pure; ``compare`` reads
the leaves and their events and names each that differs.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from ledger.log import merkle_store, sealer_state
from ledger.models import LogLeaf

WINDOW = 2000  # leaves compared from the cursor per run (~2 IN queries of events per 1,000)
NEWEST = 500  # the newest leaves, compared every run
SUSPECTS = 50  # positions remembered as wrong, at most (each compared every run)


@dataclass(frozen=True)
class Plan:
    ranges: tuple[tuple[int, int], ...]  # disjoint [start, end) position ranges, in order
    next_cursor: int  # where the next run's window begins


def plan(tree_size: int, cursor: int, suspects: Iterable[int] = (), *,
         window: int | None = None, newest: int | None = None) -> Plan:
    """The positions one run compares: the window from ``cursor`` (a cursor
    outside the tree, after a truncation, starts again at 0), the newest
    leaves and the suspects still inside the tree."""
    window = WINDOW if window is None else window
    newest = NEWEST if newest is None else newest
    if tree_size <= 0:
        return Plan((), 0)
    start = cursor if 0 <= cursor < tree_size else 0
    end = min(tree_size, start + max(1, window))
    wanted = [(start, end), (max(0, tree_size - max(0, newest)), tree_size)]
    wanted += [(p, p + 1) for p in suspects if 0 <= p < tree_size]
    return Plan(_merge(wanted), 0 if end >= tree_size else end)


def _merge(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(r for r in ranges if r[0] < r[1]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return tuple(merged)


@dataclass(frozen=True)
class Mismatch:
    position: int
    event_id: int | None
    goal_id: str = ""
    seq: int | None = None
    what: str = "changed"  # "changed" | "gone" (the event deleted) | "missing" (no leaf)

    def describe(self) -> str:
        if self.what == "missing":
            return f"leaf {self.position} is missing from the stored tree"
        if self.what == "gone":
            return f"leaf {self.position}: its event {self.event_id} is gone"
        return (f"leaf {self.position}: event {self.event_id} (goal {self.goal_id}, seq "
                f"{self.seq}) no longer matches its stored leaf: the event was changed after "
                "it was sealed, or the leaf was")


_CHUNK = 1000


def compare(ranges: Iterable[tuple[int, int]]) -> tuple[int, list[Mismatch]]:
    """Each stored leaf in ``ranges`` against the leaf its event gives now:
    how many were compared, and each that differs (in position order)."""
    compared, found = 0, []
    for start, end in ranges:
        for low in range(start, end, _CHUNK):
            high = min(end, low + _CHUNK)
            leaves = list(LogLeaf.objects.filter(position__gte=low, position__lt=high)
                          .order_by("position").values_list("position", "event_id", "hash"))
            rows = merkle_store.event_rows(event_id for _, event_id, _ in leaves)
            present = set()
            for position, event_id, stored in leaves:
                present.add(position)
                row = rows.get(event_id)
                if row is None:
                    found.append(Mismatch(position, event_id, what="gone"))
                elif merkle_store.leaf(merkle_store.record(position, row)).hex() != stored:
                    found.append(Mismatch(position, event_id, str(row[1]), row[2]))
            found += [Mismatch(p, None, what="missing")
                      for p in range(low, high) if p not in present]
            compared += high - low
    return compared, sorted(found, key=lambda m: m.position)


def alarm_text(mismatches: list[Mismatch], shown: int = 5) -> str:
    """The alarm's words: how many, and the first few named."""
    named = "; ".join(m.describe() for m in mismatches[:shown])
    more = f"; … {len(mismatches) - shown} more" if len(mismatches) > shown else ""
    return (f"sealed events and their stored leaves differ: {len(mismatches)} of the leaves "
            f"compared no longer match their events (the rolling comparison): {named}{more}")


@dataclass(frozen=True)
class Pass:
    compared: int
    ranges: tuple[tuple[int, int], ...]
    mismatches: list[Mismatch]


def run() -> Pass:
    """One rolling pass: the plan from the cursor kept beside the sealer's
    record, the comparison, the cursor and the suspects kept for the next."""
    cursor, suspects = sealer_state.read_rolling()
    planned = plan(merkle_store.size(), cursor, suspects)
    compared, mismatches = compare(planned.ranges)
    sealer_state.write_rolling(planned.next_cursor,
                               [m.position for m in mismatches[:SUSPECTS]])
    return Pass(compared, planned.ranges, mismatches)


def check() -> Pass:
    """``run``, raising the sealer's alarm (``LogInconsistent``) on a mismatch."""
    done = run()
    if done.mismatches:
        raise sealer_state.raise_alarm(alarm_text(done.mismatches))
    return done

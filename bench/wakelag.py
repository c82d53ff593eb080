"""Where each pulled wake's time went, read from what the deployment recorded.

    python bench/wakelag.py --since ISO [--log scheduler.log]   (run with the deployment's env)

``bench/capacity.py`` runs it against its deployment before tearing it down.
For every end of turn (``lease.released``) after ``--since`` that was
followed by a pull, four stages, each from the server's own records:

- ``to_slot``: the end of turn to the watchdog slot that resumed the goal
  (by design at most one interval: an hour, compressed 60 s, exactly that for
  the first, armed at the release; a slot whose claim found the lease still
  held was ``worker_busy_noop`` and the next one resumes; negative when the
  slot fell due before the release and its look came after);
- ``to_task``: the slot to its django-q2 task (``Task.started``, which
  django-q2 stamps when the scheduler's pass creates the task, not when a
  worker takes it): django-q2's look at its schedules and its pass;
  ``to_created`` is the same read from the scheduler's "created task" log
  line for that schedule (with ``--log``);
- ``to_claim``: the task's creation to the ``wake.claimed`` event: the
  pass's commit, the broker's poll, the queue of that pass's tasks, the claim;
- ``to_pull``: the claim to the agent's ``lease.acquired`` (its poll, its lag).

Prints one JSON object: percentiles of each stage and of the whole wait, the
scheduler's passes (how many schedules each, how long), the worst wakes.
"""

import argparse
import json
import os
import re
import sys
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

STAGES = ("to_slot", "to_created", "to_task", "to_claim", "to_pull", "wait")
_CREATED = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*created task \S+ from schedule "
                      r"\[wakeledger-watchdog-([0-9a-f-]+)\]")


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {"n": len(ordered), "p50": at(0.5), "p99": at(0.99), "max": round(ordered[-1], 2)}


def scheduler_lines(log: Path | None) -> dict[str, list[datetime]]:
    """When the scheduler created each watchdog's tasks (its log's INFO lines,
    local time as logging writes it, here UTC)."""
    created: dict[str, list[datetime]] = defaultdict(list)
    if log is None or not log.exists():
        return created
    for line in log.read_text(errors="replace").splitlines():
        found = _CREATED.match(line)
        if found:
            at = datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S,%f").astimezone()
            created[found[2]].append(at)
    return created


def passes(created: dict[str, list[datetime]]) -> list[dict[str, Any]]:
    """The scheduler's passes: creation lines closer than 5 s are one pass."""
    moments = sorted(at for ats in created.values() for at in ats)
    found: list[list[datetime]] = []
    for at in moments:
        if found and (at - found[-1][-1]).total_seconds() < 5:
            found[-1].append(at)
        else:
            found.append([at])
    return [{"at": group[0].isoformat(timespec="seconds"), "schedules": len(group),
             "seconds": round((group[-1] - group[0]).total_seconds(), 2)} for group in found]


def measure(since: datetime, log: Path | None = None) -> dict[str, Any]:
    """The report (see the module doc), Django set up."""
    from django_q.models import Task

    from ledger.models import Event

    created = scheduler_lines(log)
    started: dict[tuple[str, str], datetime] = {}
    for task in Task.objects.filter(func__endswith="fire_watchdog").only("args", "kwargs",
                                                                           "started"):
        kwargs = task.kwargs or {}
        if kwargs.get("intended_date") and task.args:
            started[(str(task.args[0]),
                     datetime.fromisoformat(kwargs["intended_date"]))] = task.started
    events = Event.objects.filter(kind__in=("lease.released", "wake.claimed", "lease.acquired"),
                                  recorded_at__gte=since - timedelta(minutes=5)) \
        .order_by("goal_id", "seq").values_list("goal_id", "kind", "data", "recorded_at")
    wakes: list[dict[str, Any]] = []
    busy_after_release = 0
    open_turn: dict[str, dict[str, Any]] = {}
    for goal, kind, data, at in events.iterator(chunk_size=2000):
        goal = str(goal)
        turn = open_turn.get(goal)
        if kind == "lease.released":
            open_turn[goal] = {"goal": goal, "released": at} if at >= since else None
        elif turn is None:
            continue
        elif kind == "wake.claimed" and data.get("outcome") == "ready_for_pull":
            turn.setdefault("claimed", at)
            turn.setdefault("slot", datetime.fromisoformat(data["slot"]) if data.get("slot")
                            else None)
        elif kind == "wake.claimed" and data.get("outcome") == "worker_busy_noop":
            busy_after_release += at > turn["released"]
        elif kind == "lease.acquired" and "claimed" in turn:
            open_turn[goal] = None
            wakes.append(_stages(turn, at, started, created))
    worst = sorted(wakes, key=lambda w: -w["wait"])[:5]
    return {"wakes": len(wakes), "busy_claims_after_release": busy_after_release,
            "stages": {name: percentiles([w[name] for w in wakes if w.get(name) is not None])
                       for name in STAGES},
            "scheduler_passes": passes(created), "worst": worst}


def _stages(turn: dict[str, Any], pulled: datetime, started: dict, created: dict
            ) -> dict[str, Any]:
    slot = turn["slot"]
    wake: dict[str, Any] = {"goal": turn["goal"][:8],
                            "released": turn["released"].isoformat(timespec="milliseconds"),
                            "wait": (pulled - turn["released"]).total_seconds(),
                            "to_pull": (pulled - turn["claimed"]).total_seconds()}
    if slot is None:
        return wake
    wake["slot"] = slot.isoformat(timespec="seconds")
    wake["to_slot"] = (slot - turn["released"]).total_seconds()
    task = started.get((turn["goal"], slot))
    if task is not None:
        wake["to_task"] = (task - slot).total_seconds()
        wake["to_claim"] = (turn["claimed"] - task).total_seconds()
    made = [at for at in created.get(turn["goal"], []) if at >= slot]
    if made:
        wake["to_created"] = (min(made) - slot).total_seconds()
    return {k: round(v, 2) if isinstance(v, float) else v for k, v in wake.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--since", required=True, help="ends of turn from this instant (ISO)")
    p.add_argument("--log", type=Path, help="the scheduler's log (its INFO lines)")
    args = p.parse_args()
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ledger.project.settings")
    django.setup()
    print(json.dumps(measure(datetime.fromisoformat(args.since), args.log)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

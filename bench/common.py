"""What every benchmark shares: rows, medians, interleaved rounds, output.

A row is one figure with its baseline measured in the same run:

    {name, value, unit, baseline, baseline_value, ratio, p50_ms, p99_ms, n, reps}

``value`` and ``baseline_value`` are medians over ``reps`` interleaved rounds
(ours, baseline, ours, baseline, ...), ``ratio`` is the median of the
per-round ratios (value / baseline_value, or baseline / value for figures
where less is better, as the row's unit says), so a slow minute on a shared
machine hits both sides of a round alike. ``n`` is the work per round
(events, requests, ...). Latency percentiles are over every operation of every
round of our side, where there is one per operation.

Each bench script takes ``--quick`` (fewer rounds, smaller sizes) and
``--out FILE`` (write its rows as JSON); ``bench/run.py`` runs them all.
"""

import argparse
import json
import math
import os
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

QUICK_REPS = 5
FULL_REPS = 5


@dataclass
class Row:
    name: str
    value: float
    unit: str
    baseline: str
    baseline_value: float | None
    ratio: float | None
    p50_ms: float | None
    p99_ms: float | None
    n: int
    reps: int


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def percentile_ms(seconds: Sequence[float], pct: float) -> float | None:
    """The pct-th percentile (nearest rank) of durations in seconds, in ms."""
    if not seconds:
        return None
    ordered = sorted(seconds)
    index = min(len(ordered) - 1, max(0, math.ceil(pct / 100 * len(ordered)) - 1))
    return ordered[index] * 1000


def interleaved(reps: int, ours: Callable[[], float], base: Callable[[], float]
                ) -> tuple[float, float, float]:
    """Run ``reps`` rounds of (base, ours) alternately, swapping which goes
    first each round; return (median ours, median base, median per-round
    ours/base)."""
    pairs = []
    for i in range(reps):
        if i % 2:
            o = ours()
            b = base()
        else:
            b = base()
            o = ours()
        pairs.append((o, b))
    return (median([o for o, _ in pairs]), median([b for _, b in pairs]),
            median([o / b for o, b in pairs]))


def rotating_rounds(sides: Sequence[Callable[[int], float]], events: int, reps: int,
                    warmed: Callable[[], None] | None = None) -> list[list[float]]:
    """Each side warmed up, then ``reps`` rounds of every side in turn, the
    order rotating each round, so each round's figures compare sides measured
    within seconds of each other. A side runs ``events`` operations and
    answers its rate; ``warmed`` runs after the warm-up (clear latencies the
    warm-up recorded). Returns each side's rates, round by round."""
    for side in sides:
        side(min(100, events))  # warm up
    if warmed is not None:
        warmed()
    rates: list[list[float]] = [[] for _ in sides]
    for rep in range(reps):
        for k in range(len(sides)):
            i = (k + rep) % len(sides)
            rates[i].append(sides[i](events))
    return rates


def round_ratio(ours: Sequence[float], theirs: Sequence[float]) -> float:
    """The median of the per-round ratios ours / theirs."""
    return median([o / b for o, b in zip(ours, theirs, strict=True)])


def database_main(doc: str | None, script: str,
                  benches: dict[str, Callable[[int, int], list[Row]]],
                  available: Callable[[], bool] = lambda: True) -> None:
    """The main of a bench that measures each database in its own process:
    Django (and whatever else a side sets up) is set up once per process, for
    one database, so ``--database both`` runs one child per database and
    gathers their rows."""
    p = parser(doc)
    p.add_argument("--events", type=int, default=None, help="operations per round")
    p.add_argument("--database", choices=(*benches, "both"), default="both")
    args = p.parse_args()
    reps = reps_of(args)
    events = args.events or (200 if args.quick else 1000)
    if not available():
        emit([], args.out)
        return
    if args.database != "both":
        emit(benches[args.database](events, reps), args.out)
        return
    import subprocess
    import tempfile

    rows: list[Row] = []
    for database in benches:
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            command = [sys.executable, script, "--database", database,
                       "--events", str(events), "--reps", str(reps), "--out", out.name]
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            text = Path(out.name).read_text()
            rows += [Row(**r) for r in json.loads(text)] if text else []
    emit(rows, args.out)


def parser(doc: str | None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer rounds, smaller sizes")
    p.add_argument("--reps", type=int, default=None, help="rounds (at least 5)")
    p.add_argument("--out", type=Path, default=None, help="write the rows here as JSON")
    return p


def reps_of(args: argparse.Namespace) -> int:
    reps = args.reps or (QUICK_REPS if args.quick else FULL_REPS)
    return max(5, reps)


def fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    if digits == 0 and abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def table(rows: Sequence[Row]) -> str:
    header = ("name", "value", "unit", "baseline", "baseline value", "ratio", "p50 ms",
              "p99 ms", "n", "reps")
    lines = [header]
    for r in rows:
        lines.append((r.name, fmt(r.value, 0 if r.value >= 100 else 2), r.unit, r.baseline,
                      fmt(r.baseline_value, 0 if (r.baseline_value or 0) >= 100 else 2),
                      fmt(r.ratio, 2) + ("x" if r.ratio is not None else ""),
                      fmt(r.p50_ms, 2), fmt(r.p99_ms, 2), f"{r.n:,}", str(r.reps)))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for k, line in enumerate(lines):
        out.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip())
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def markdown(rows: Sequence[Row]) -> str:
    out = ["| row | value | unit | baseline (same run) | baseline value | ratio | p50 ms | "
           "p99 ms | n | reps |", "|---|---:|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r.name} | {fmt(r.value, 0 if r.value >= 100 else 2)} | {r.unit} | "
                   f"{r.baseline} | "
                   f"{fmt(r.baseline_value, 0 if (r.baseline_value or 0) >= 100 else 2)} | "
                   f"{fmt(r.ratio, 2)}{'x' if r.ratio is not None else ''} | "
                   f"{fmt(r.p50_ms, 2)} | {fmt(r.p99_ms, 2)} | {r.n:,} | {r.reps} |")
    return "\n".join(out)


def emit(rows: Sequence[Row], out: Path | None) -> None:
    print(table(rows), flush=True)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")


def django_setup(var_dir: str, database_url: str | None = None,
                 settings: str = "ledger.project.settings") -> None:
    """Point Django at a throwaway var/ (and database) and set it up."""
    os.environ["WAKELEDGER_VAR_DIR"] = var_dir
    os.environ["DJANGO_SETTINGS_MODULE"] = settings
    if database_url:
        os.environ["DATABASE_URL"] = database_url
        os.environ.setdefault("SECRET_KEY", "bench-" + "k" * 50)
    else:
        os.environ.pop("DATABASE_URL", None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)

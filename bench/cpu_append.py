"""A checkpoint's own CPU, in figures a busy machine moves least.

    python bench/cpu_append.py [--database sqlite|postgres] [--against TREE]
    python bench/cpu_append.py --instructions [--against TREE]

``store.execute`` of the append bench's checkpoint (bench/append.py) on one
goal, after a warm-up; SQLite with ``synchronous=OFF`` (the fsync is the
disk's, not ours), PostgreSQL on a throwaway test server (client CPU only).

- default: user and system CPU µs per checkpoint, each the median of
  ``--batches`` batches of ``--commands`` (``getrusage``);
- ``--instructions``: instructions per checkpoint, counted by callgrind
  (``valgrind --tool=callgrind``) around the measured batch only; the same
  tree gives the same count to ±0.5 % whatever the load (SQLite);
- ``--against TREE``: the same figure for another checkout of the project
  (``git worktree add /tmp/before HEAD~3``, or ``git archive | tar -x``),
  processes alternating between the trees, ``--rounds`` rounds; prints each
  side's median and the median per-round ratio (ours / theirs).

How the command's own CPU was measured (docs/performance.md, "The
command's own CPU"); bench/profile_append.py says where the time goes.
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def measure(args: argparse.Namespace, tree: Path) -> None:
    """In this process: the figure for ``tree``'s code."""
    sys.path.insert(0, str(tree))
    from bench.common import django_setup

    with tempfile.TemporaryDirectory(prefix="wakeledger-cpu-") as tmp:
        django_setup(tmp, os.environ.get("WAKELEDGER_CPU_DATABASE_URL"))
        from django.db import connection

        from bench.append import Ours

        ours = Ours()
        ours.run(300)  # warm: the state cache, SQLite's statement cache, page splits
        if connection.vendor == "sqlite":
            connection.connection.execute("PRAGMA synchronous=OFF")
        if args.instructions:
            # callgrind_control answers once valgrind has switched: only the
            # measured batch is counted.
            control = [shutil.which("callgrind_control") or "callgrind_control", "-i"]
            pid = str(os.getpid())
            subprocess.run([*control, "on", pid], check=True, capture_output=True)
            ours.run(args.commands)
            subprocess.run([*control, "off", pid], check=True, capture_output=True)
            print(f"RESULT {args.commands}")
        else:
            user, system = [], []
            for _ in range(args.batches):
                before = resource.getrusage(resource.RUSAGE_SELF)
                ours.run(args.commands)
                after = resource.getrusage(resource.RUSAGE_SELF)
                user.append((after.ru_utime - before.ru_utime) / args.commands * 1e6)
                system.append((after.ru_stime - before.ru_stime) / args.commands * 1e6)
            print(f"RESULT {statistics.median(user):.1f} {statistics.median(system):.1f}")
        connection.close()


def one(tree: Path, args: argparse.Namespace, url: str | None) -> float:
    """Run ``measure`` in a process of ``tree``; its figure (µs or instructions)."""
    # This file, with the tree's code first on the path: an older tree may
    # not have it.
    command = [sys.executable, str(Path(__file__).resolve()), "--measure",
               "--commands", str(args.commands), "--batches", str(args.batches)]
    env = {**os.environ, "PYTHONPATH": str(tree), "WAKELEDGER_CPU_TREE": str(tree)}
    env.pop("DATABASE_URL", None)
    if url:
        env["WAKELEDGER_CPU_DATABASE_URL"] = url
    out_file = None
    if args.instructions:
        fd, out_file = tempfile.mkstemp(prefix="callgrind-")
        os.close(fd)
        command = [shutil.which("valgrind") or "valgrind", "--tool=callgrind", "--instr-atstart=no",
                   f"--callgrind-out-file={out_file}", *command, "--instructions"]
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    result = [line for line in done.stdout.splitlines() if line.startswith("RESULT")]
    if done.returncode or not result:
        sys.exit(f"{tree}: the measurement failed\n{done.stderr[-3000:]}")
    if out_file is None:
        return float(result[0].split()[1])
    collected = [line for line in done.stderr.splitlines() if "Collected" in line]
    os.unlink(out_file)
    return int(collected[-1].split(":")[-1].replace(",", "")) / args.commands


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--instructions", action="store_true")
    p.add_argument("--against", type=Path, help="another checkout to compare with")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--commands", type=int, default=None)
    p.add_argument("--batches", type=int, default=5)
    p.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.commands = args.commands or (400 if args.instructions else 800)
    if args.measure:
        measure(args, Path(os.environ.get("WAKELEDGER_CPU_TREE") or ROOT))
        return
    if args.instructions and shutil.which("valgrind") is None:
        sys.exit("--instructions needs valgrind (apt-get install valgrind)")
    trees = [ROOT, *([args.against.resolve()] if args.against else [])]
    unit = "instructions" if args.instructions else "µs user CPU"
    figures: dict[Path, list[float]] = {tree: [] for tree in trees}
    rounds = args.rounds if args.against else 1
    with ExitStack() as stack:
        base_url = None
        if args.database == "postgres":
            sys.path.insert(0, str(ROOT))
            from tests.postgres import find_bindir, server

            bindir = find_bindir()
            if bindir is None:
                sys.exit("no PostgreSQL binaries (/usr/lib/postgresql/*/bin)")
            base_url = stack.enter_context(server(bindir))
        for n in range(rounds):
            for tree in trees if n % 2 == 0 else trees[::-1]:
                url = base_url and _fresh_database(base_url, f"cpu_{n}_{trees.index(tree)}")
                figures[tree].append(one(tree, args, url))
    for tree, values in figures.items():
        print(f"{tree}: {statistics.median(values):,.1f} {unit} per checkpoint "
              f"({', '.join(f'{v:,.1f}' for v in values)})")
    if args.against:
        pairs = zip(figures[ROOT], figures[trees[1]], strict=True)
        ratios = [ours / theirs for ours, theirs in pairs]
        print(f"ours / theirs: {statistics.median(ratios):.3f} (median of {rounds} rounds)")


def _fresh_database(url: str, name: str) -> str:
    """A database of its own per process: the bench's goal key is fixed, so a
    second run in one database would be handed the first one's goal."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    return url.rsplit("/", 1)[0] + "/" + name


if __name__ == "__main__":
    main()

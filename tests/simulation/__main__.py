"""`python -m tests.simulation --seed 7 --days 30 [--goals 40]` (what `make simulate`
runs): one world on a throwaway SQLite database, its figures, and for every broken
invariant the trace of the first goal that broke it. Exits 1 when one broke."""

import argparse
import os
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation")
    parser.add_argument("--seed", type=int, action="append",
                        help="a seed (repeatable; default 1)")
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--goals", type=int, default=30)
    parser.add_argument("--traces", type=int, default=1,
                        help="traces shown per broken invariant (default 1)")
    parser.add_argument("--progress", action="store_true",
                        help="one line per simulated day on stderr; SIGUSR1 prints the stack")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a world setting (world.Config), a Python literal: "
                             "--set poisoned=0.5 --set \"planted=('sweeper_off',)\"")
    args = parser.parse_args()
    import ast

    overrides = {}
    for item in args.set:
        name, _, value = item.partition("=")
        overrides[name.strip()] = ast.literal_eval(value.strip())
    if args.progress:
        import faulthandler
        import signal

        overrides["progress"] = True
        faulthandler.register(signal.SIGUSR1)  # where a long world spends its time, on demand
    os.environ.pop("DATABASE_URL", None)  # SQLite, as the brief says
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    import logging

    logging.disable(logging.INFO)  # the scheduler's per-wake lines would drown the report
    from django.db import transaction
    from django.test.utils import setup_databases, setup_test_environment, teardown_databases

    from tests.simulation.world import simulate

    setup_test_environment()  # as pytest-django does: the test client's host is allowed
    config = setup_databases(verbosity=0, interactive=False)
    broken = False
    try:
        for seed in args.seed or [1]:
            started = time.perf_counter()
            with transaction.atomic():
                report = simulate(seed, days=args.days, goals=args.goals, **overrides)
                transaction.set_rollback(True)
            print(report.summary())
            print(f"  ({time.perf_counter() - started:.1f} s)")
            shown: dict[str, int] = {}
            for violation in report.violations:
                if shown.get(violation.invariant, 0) >= args.traces:
                    continue
                shown[violation.invariant] = shown.get(violation.invariant, 0) + 1
                print(f"\n{violation.headline()}\n{violation.trace}\n")
            if report.host_silent_trace:
                print(f"\nlisted HOST_SILENT while its host was healthy (the most hours):\n"
                      f"{report.host_silent_trace}\n")
            broken = broken or bool(report.violations)
    finally:
        teardown_databases(config, verbosity=0)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())

"""Run the whole benchmark suite, print one table, write var/bench/latest.json.

    make bench          (python bench/run.py)
    make bench-quick    (python bench/run.py --quick)

Each benchmark runs in its own process (each sets Django up on its own
throwaway database) and hands its rows back as JSON. A benchmark that fails
is reported and the others still run; the exit status is then 1.
"""

import json
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, Row, markdown, parser, table

SUITE = ("append.py", "peers.py", "http_checkpoint.py", "replay.py", "history.py", "scheduler.py",
         "scale.py", "verifiable.py", "trace.py")


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--only", nargs="*", default=None, help="benchmark files to run")
    p.add_argument("--markdown", action="store_true", help="also print a Markdown table")
    args = p.parse_args()
    out = args.out or ROOT / "var" / "bench" / "latest.json"
    rows: list[Row] = []
    failed = []
    started = time.monotonic()
    for name in args.only or SUITE:
        script = ROOT / "bench" / name
        if not script.exists():
            continue
        with tempfile.NamedTemporaryFile(suffix=".json") as partial:
            command = [sys.executable, str(script), "--out", partial.name]
            command += ["--quick"] if args.quick else []
            command += ["--reps", str(args.reps)] if args.reps else []
            t0 = time.monotonic()
            print(f"== {name}", flush=True)
            done = subprocess.run(command, cwd=ROOT)
            print(f"   ({time.monotonic() - t0:.0f} s)", flush=True)
            text = Path(partial.name).read_text()
            if done.returncode or not text:
                failed.append(name)
                continue
            rows += [Row(**r) for r in json.loads(text)]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps([r.__dict__ for r in rows], indent=2) + "\n")
    meta = out.with_name(out.stem + ".meta.json")
    meta.write_text(json.dumps({
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": round(time.monotonic() - started), "quick": args.quick,
        "python": platform.python_version(), "machine": platform.machine(),
        "cpus": __import__("os").cpu_count(), "failed": failed}, indent=2) + "\n")
    print()
    print(table(rows))
    if args.markdown:
        print()
        print(markdown(rows))
    print(f"\n{len(rows)} rows in {time.monotonic() - started:.0f} s -> {out}")
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Checkpoints over HTTP through the production server, against a bare DRF insert.

    python bench/http_checkpoint.py [--quick] [--seconds S]

Starts gunicorn exactly as ``make run`` does (the Procfile's web line: the
project's gunicorn_conf, 2 sync workers, access log on) on a temporary SQLite
database, with bench/settings.py, which only adds the bare baseline view
(bench/bare.py) to the product's URLs. Client processes (1 or 8, each its own
agent token and goal, holding its lease) post ~300-byte checkpoints for a
fixed time: real bearer authentication, validation, fencing, and a fresh
``Idempotency-Key`` on every request (also measured without one). The
baseline is the bare view, posted the same body by the same clients. The
configurations run in interleaved rounds; each ratio is the median of the
per-round ratios against the bare view at the same client count.
"""

import http.client
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, Row, median, parser, percentile_ms, reps_of
from bench.common import emit as emit_rows
from tests.postgres import free_port

BODY = {
    "current_step": "running the integration tests against the staging database",
    "progress_pct": 40,
    "completed": ["reproduced the failure locally", "wrote a failing test"],
    "next_actions": ["fix the race in the checkout handler", "open the pull request"],
    "note": "the flake shows up about once in twenty runs",
}


def setup(var_dir: str, clients: int) -> list[str]:
    """Migrate, create the bare table and one agent token per client (a child
    process: the driver itself never sets Django up)."""
    code = f"""
import json, sys
sys.path.insert(0, {str(ROOT)!r})
from bench.common import django_setup
django_setup({var_dir!r}, settings="bench.settings")
from django.db import connection
from bench.bare import CREATE
from ledger.access import accounts
from ledger.operators.commands.accounts import ensure_user
with connection.cursor() as cursor:
    cursor.execute(CREATE)
print(json.dumps([accounts.issue_token(ensure_user(f"bench-agent-{{i}}", "agent"))
                  for i in range({clients})]))
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, env=server_env(var_dir, 0))
    return json.loads(out.stdout.strip().splitlines()[-1])


def server_env(var_dir: str, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(WAKELEDGER_VAR_DIR=var_dir, DJANGO_SETTINGS_MODULE="bench.settings",
               PORT=str(port), WAKELEDGER_PORT=str(port or 8000),
               PYTHONPATH=str(ROOT))
    return env


def start_server(var_dir: str, port: int) -> subprocess.Popen:
    bin_dir = Path(sys.executable).parent
    # The Procfile's web line, with its defaults.
    command = [str(bin_dir / "gunicorn"), "-c", "python:ledger.project.gunicorn_conf",
               "ledger.project.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "2",
               "--access-logfile", "-"]
    server = subprocess.Popen(command, cwd=ROOT, env=server_env(var_dir, port),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            status, _ = request(port, "GET", "/api/v1/health", None, {})
            if status == 200:
                return server
        except OSError:
            pass
        time.sleep(0.2)
    server.kill()
    raise RuntimeError("gunicorn did not answer /api/v1/health within 60 s")


def request(port: int, method: str, path: str, body: dict | None,
            headers: dict[str, str]) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        payload = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=payload,
                     headers={"Content-Type": "application/json", **headers})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def start_goal(port: int, token: str, n: int) -> tuple[str, dict]:
    status, raw = request(port, "POST", "/api/v1/goals", {
        "goal_key": f"bench-{n}", "workspace": f"/bench/http/{n}", "objective": "benchmark",
        "policy": {"lease_seconds": 3600}}, {"Authorization": f"Bearer {token}"})
    if status not in (200, 201):
        raise RuntimeError(f"starting a goal answered {status}: {raw[:300]!r}")
    answer = json.loads(raw)
    lease = answer["lease"]
    return answer["goal"]["id"], {"token": lease["token"], "generation": lease["generation"]}


def client(args: tuple) -> tuple[int, int, float, list[float]]:
    """Post for ``seconds``; return (ok, failed, elapsed, latencies)."""
    port, path, headers, body, seconds, keyed = args
    ok = failed = 0
    latencies = []
    started = time.perf_counter()
    end = started + seconds
    while True:
        now = time.perf_counter()
        if now >= end:
            break
        h = {**headers, "Idempotency-Key": str(uuid.uuid4())} if keyed else headers
        status, _ = request(port, "POST", path, body, h)
        latencies.append(time.perf_counter() - now)
        if status == 201:
            ok += 1
        else:
            failed += 1
    return ok, failed, time.perf_counter() - started, latencies


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--seconds", type=float, default=None, help="seconds per run")
    args = p.parse_args()
    reps = reps_of(args)
    seconds = args.seconds or (0.75 if args.quick else 3.0)
    counts = (1, 8)
    with tempfile.TemporaryDirectory(prefix="wakeledger-bench-") as tmp:
        tokens = setup(tmp, max(counts))
        port = free_port()
        server = start_server(tmp, port)
        try:
            goals = [start_goal(port, token, i) for i, token in enumerate(tokens)]
            jobs = {}
            for c in counts:
                jobs[("keyed", c)] = [
                    (port, f"/api/v1/goals/{goal}/checkpoints",
                     {"Authorization": f"Bearer {tokens[i]}"}, {**BODY, "lease": lease},
                     seconds, True) for i, (goal, lease) in enumerate(goals[:c])]
                jobs[("unkeyed", c)] = [(*job[:5], False) for job in jobs[("keyed", c)]]
                jobs[("bare", c)] = [(port, "/bench/bare", {}, {**BODY, "lease": job[3]["lease"]},
                                      seconds, False) for job in jobs[("keyed", c)]]
            results: dict[tuple, list] = {key: [] for key in jobs}
            with multiprocessing.get_context("fork").Pool(max(counts)) as pool:
                for key in jobs:  # warm both workers up on every path
                    pool.map(client, [(*job[:4], 0.3, job[5]) for job in jobs[key]])
                for rep in range(reps):
                    order = list(jobs) if rep % 2 == 0 else list(reversed(jobs))
                    for key in order:
                        outcomes = pool.map(client, jobs[key])
                        failed = sum(o[1] for o in outcomes)
                        if failed:
                            raise RuntimeError(f"{key}: {failed} requests were not answered 201")
                        rate = sum(o[0] for o in outcomes) / max(o[2] for o in outcomes)
                        results[key].append((rate, [t for o in outcomes for t in o[3]]))
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)

    rows = []
    for kind, label in (("keyed", "with an Idempotency-Key"), ("unkeyed", "no Idempotency-Key")):
        for c in counts:
            ours, bare = results[(kind, c)], results[("bare", c)]
            latencies = [t for _, ts in ours for t in ts]
            bare_lat = [t for _, ts in bare for t in ts]
            rows.append(Row(
                name=f"http checkpoint, {label}, {c} client{'s' if c > 1 else ''}",
                value=median([r for r, _ in ours]), unit="req/s",
                baseline=f"bare DRF insert view, same gunicorn (p99 "
                         f"{percentile_ms(bare_lat, 99):.1f} ms)",
                baseline_value=median([r for r, _ in bare]),
                ratio=median([o / b for (o, _), (b, _) in zip(ours, bare, strict=True)]),
                p50_ms=percentile_ms(latencies, 50), p99_ms=percentile_ms(latencies, 99),
                n=len(latencies) // reps, reps=reps))
    emit_rows(rows, args.out)


if __name__ == "__main__":
    main()

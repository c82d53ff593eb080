"""The soak: Wake Ledger scaled out on PostgreSQL, under a realistic crowd.

    make soak                      # 5 minutes
    SOAK_SECONDS=60 make soak      # any length

A throwaway PostgreSQL (tests/postgres.py's), **two** gunicorn instances on
their own ports (as the Procfile starts them, with ledger/project/gunicorn_conf.py,
each with its own control socket and var dir, one SECRET_KEY and
DATABASE_URL), **two** schedulers (`manage.py scheduler`, the Procfile's
clean-shutdown launcher of qcluster) and a local webhook receiver. 50
simulated agents (SOAK_AGENTS) drive goals through their whole life over
real HTTP, round-robin over the two web instances: checkpoints, heartbeats,
ends of turn with and without a requested wake, rate limits with a reset of a
few seconds, crashes that leave their lease to expire, approval gates that a
simulated operator resolves, finishes. About a third of the goals name the
webhook dispatcher (pushed wakes: the receiver hands the pushed lease to the
goal's agent); the rest use the default `none` (the agent pulls the wake
with POST /goals/{id}/lease). 5 % of the POSTs are sent again with the same
Idempotency-Key to the other instance. Timings are the end-to-end tests' (a
cadence "minute" of 1 s, so the default 60-minute watchdog is a 60 s one).

Afterwards, with every process stopped, it checks and prints:

- every POST a client saw acknowledged (2xx) is an event (by its
  Idempotency-Key, of the kind the endpoint writes);
- no wake occurrence granted, charged or pulled twice, no lease generation
  granted twice, no push delivered twice;
- `ledger doctor` (every goal in a liveness state), `ledger replay --check`
  and `ledger verify` exit 0;
- no 5xx, no network error, no traceback or ERROR line in the processes' logs,
  every process gone within seconds of SIGTERM, every replay answered as the
  first time, every wake in within its bound (WAKE_WITHIN, CRASH_WAKE_WITHIN);

and reports requests served, errors by class, p50/p99 latency per endpoint,
wakes fired / claimed / dispatched, and the longest time a wake waited past
its due time. Exit status 1 when any check fails. Logs stay in var/soak/<time>/.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import os
import queue
import random
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scheduling.signatures import HEADER as SIGNATURE_HEADER  # noqa: E402
from scheduling.signatures import verify_signature  # noqa: E402
from tests import postgres  # noqa: E402  (its throwaway server, reused)

PYTHON = sys.executable
BIN = Path(PYTHON).parent
HOOK_SECRET = "soak-" + secrets.token_hex(8)
RATE_LIMIT_TEXT = "HTTP 429 Too Many Requests: rate limit exceeded, retry after 3 seconds"
# The end-to-end tests' short timings (tests/e2e/test_e2e_qcluster.py).
FAST = {
    "WAKELEDGER_CADENCE_UNIT_SECONDS": "1",
    "WAKELEDGER_STALE_GRACE_SECONDS": "1",
    "WAKELEDGER_RESET_MARGIN_SECONDS": "1",
    "WAKELEDGER_Q_GUARD_CYCLE": "30",
}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# The event kind each acknowledged POST must have written (under its key).
WRITES = {
    "POST /goals": {"goal.started", "lease.acquired"},
    "POST /goals/{id}/checkpoints": {"checkpoint.recorded"},
    "POST /goals/{id}/lease/heartbeat": {"lease.renewed"},
    "POST /goals/{id}/lease/release": {"lease.released"},
    "POST /goals/{id}/lease": {"lease.acquired", "lease.taken_over"},
    "POST /goals/{id}/runs": {"run.reported"},
    "POST /goals/{id}/approvals": {"approval.requested"},
    "POST /goals/{id}/approvals/{gate}/resolve": {"approval.resolved"},
    "POST /goals/{id}/finish": {"goal.completed", "goal.failed", "goal.finish_requested"},
}
GRANTED = ("recurring_acquired", "ready_for_pull")
# How long a wake may take at most, with these timings. After an end of turn
# or a reset: one watchdog interval (60 s) or the reset, plus the scheduler's
# look (every 30 s), plus the agent's poll. After a crash, first the lease
# and its grace run out and the sweeper (every 60 s) records the expiry and
# arms a timeout_recovery wake due at once (ledger/domain/overdue.py), which
# the scheduler fires within 30 s.
WAKE_WITHIN = 60 + 30 + 15
CRASH_WAKE_WITHIN = 1 + 60 + 60 + 30 + 15
# The share of POSTs sent a second time with the same Idempotency-Key.
REPLAY_SHARE = 0.05


def ok(status: int) -> bool:
    return 200 <= status < 300


def _stable(answer: Any) -> Any:
    """An answer without what may differ on a replay: the derived-at-read
    fields of a goal (liveness, which depends on the clock)."""
    if isinstance(answer, dict):
        return {k: _stable(v) for k, v in answer.items() if k not in ("liveness",)}
    return answer


def now() -> float:
    return time.monotonic()


# ------------------------------------------------------------------ the client side


@dataclass
class Acked:
    key: str
    endpoint: str
    goal_id: str | None
    expects_event: bool


@dataclass
class Stats:
    lock: threading.Lock = field(default_factory=threading.Lock)
    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    outcomes: Counter = field(default_factory=Counter)
    acked: list[Acked] = field(default_factory=list)
    story: Counter = field(default_factory=Counter)  # what the agents lived through
    anomalies: list[str] = field(default_factory=list)
    # Crash -> resumed (a pushed lease or a pulled one), seconds, per crash:
    # the lease and its grace run out, the sweeper records the expiry and arms
    # a timeout_recovery wake due at once.
    crash_recovery: list[float] = field(default_factory=list)

    def note(self, what: str) -> None:
        with self.lock:
            self.story[what] += 1

    def anomaly(self, what: str) -> None:
        with self.lock:
            self.anomalies.append(what)


class Web:
    """Round-robin over the web instances; every POST carries a fresh
    Idempotency-Key and is retried once, with it, on a network error."""

    def __init__(self, ports: list[int], stats: Stats) -> None:
        self.ports = itertools.cycle(ports)
        self.lock = threading.Lock()
        self.rng = random.Random(1)  # noqa: S311  (a simulation, not a secret)
        self.stats = stats

    def _port(self) -> int:
        with self.lock:
            return next(self.ports)

    def call(self, token: str, method: str, path: str,
             body: dict | None = None) -> tuple[int, dict]:
        template = re.sub(r"/approvals/[^/]+/", "/approvals/{gate}/", path.split("?")[0])
        endpoint = f"{method} /" + UUID.sub("{id}", template)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        key = None
        if method == "POST":
            key = str(uuid.uuid4())
            headers["Idempotency-Key"] = key
        payload = json.dumps(body or {}).encode() if method == "POST" else None
        for attempt in (1, 2):
            started = now()
            try:
                connection = http.client.HTTPConnection("127.0.0.1", self._port(), timeout=60)
                try:
                    connection.request(method, f"/api/v1/{path}", body=payload, headers=headers)
                    response = connection.getresponse()
                    raw = response.read()
                    status = response.status
                finally:
                    connection.close()
            except OSError as error:
                with self.stats.lock:
                    self.stats.outcomes[f"network {type(error).__name__}"] += 1
                if attempt == 2:
                    raise
                continue
            elapsed = now() - started
            try:
                answer = json.loads(raw) if raw else {}
            except ValueError:
                answer = {"unparsed": raw[:200].decode(errors="replace")}
            with self.stats.lock:
                self.stats.latency[endpoint].append(elapsed)
                code = answer.get("code", "") if isinstance(answer, dict) else ""
                self.stats.outcomes[f"{status} {code}".strip()] += 1
                if method == "POST" and 200 <= status < 300:
                    goal = UUID.search(path)
                    expects = endpoint in WRITES and not (
                        endpoint.endswith("/lease") and not answer.get("acquired"))
                    self.stats.acked.append(Acked(key or "", endpoint,
                                                  goal.group(0) if goal else None, expects))
            if method == "POST" and self.replay_now():
                self.replay(endpoint, path, payload, headers, status, answer)
            return status, answer
        raise AssertionError("unreachable")

    def replay_now(self) -> bool:
        with self.lock:
            return self.rng.random() < REPLAY_SHARE

    def replay(self, endpoint: str, path: str, payload: bytes | None, headers: dict,
               status: int, answer: dict) -> None:
        """A client that never saw its answer sends the request again, with
        the same key, to the other instance: it must get the first answer
        back (and the ledger no second event, which the checks count)."""
        connection = http.client.HTTPConnection("127.0.0.1", self._port(), timeout=60)
        try:
            connection.request("POST", f"/api/v1/{path}", body=payload, headers=headers)
            response = connection.getresponse()
            again_status, raw = response.status, response.read()
        finally:
            connection.close()
        again = json.loads(raw) if raw else {}
        same = again_status == status and _stable(again) == _stable(answer)
        with self.stats.lock:
            self.stats.story[f"replayed with the same key: {'same' if same else 'DIFFERENT'} "
                             "answer"] += 1
            if not same:
                self.stats.anomalies.append(
                    f"{endpoint} replayed: {status} then {again_status} "
                    f"({answer.get('code', '')} / {again.get('code', '')})")


class Pushes:
    """The webhook receiver's deliveries, by goal, for the agents to take."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_goal: dict[str, queue.Queue] = defaultdict(queue.Queue)
        self.occurrences: Counter = Counter()
        self.bad_signatures = 0

    def deliver(self, headers: Any, raw: bytes) -> None:
        packet = json.loads(raw)
        with self.lock:
            self.occurrences[packet["occurrence_id"]] += 1
            if not verify_signature(HOOK_SECRET, headers.get(SIGNATURE_HEADER), raw):
                self.bad_signatures += 1
            inbox = self.by_goal[packet["goal_id"]]
        inbox.put(packet)

    def inbox(self, goal_id: str) -> queue.Queue:
        with self.lock:
            return self.by_goal[goal_id]


@contextlib.contextmanager
def receiver(pushes: Pushes) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # http.server's naming
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            pushes.deliver(self.headers, raw)
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/hook"
    finally:
        server.shutdown()
        server.server_close()


class Agent(threading.Thread):
    """One simulated agent: goals one after another until the deadline."""

    def __init__(self, name: str, token: str, web: Web, pushes: Pushes, stats: Stats,
                 deadline: float, seed: int) -> None:
        super().__init__(name=name, daemon=True)
        self.token, self.web, self.pushes, self.stats = token, web, pushes, stats
        self.deadline = deadline
        self.rng = random.Random(seed)  # noqa: S311  (a simulation, not a secret)

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        return self.web.call(self.token, method, path, body)

    def pause(self, low: float, high: float) -> None:
        time.sleep(min(self.rng.uniform(low, high), max(0.0, self.deadline - now())))

    def late(self) -> bool:
        return now() >= self.deadline

    def run(self) -> None:
        self.pause(0, 5)  # not all at once
        for number in itertools.count(1):
            if self.late():
                return
            try:
                self.goal(number)
            except Exception as error:  # reported; the agent goes on
                self.stats.anomaly(f"{self.name} goal {number}: {type(error).__name__}: "
                                   f"{error}")
                self.pause(1, 2)

    def goal(self, number: int) -> None:
        pushed = self.rng.random() < 0.35
        policy: dict[str, Any] = {"lease_seconds": self.rng.choice([5, 10, 20])}
        if pushed:
            policy["dispatch"] = "hook"
        status, started = self.call("POST", "goals", {
            "goal_key": f"{self.name}-{number}", "workspace": f"/srv/soak/{self.name}/{number}",
            "objective": f"Soak goal {number} of {self.name}", "done_criteria": ["all steps"],
            "next_actions": ["step 1"], "policy": policy})
        if not ok(status) or not started.get("acquired"):
            self.stats.anomaly(f"{self.name}: start answered {status} {started}")
            return
        gid = started["goal"]["id"]
        lease: dict | None = {"token": started["lease"]["token"],
                              "generation": started["lease"]["generation"]}
        self.stats.note("goal started (pushed wakes)" if pushed else "goal started (pulled)")
        steps = self.rng.randint(3, 7)
        for step in range(1, steps + 1):
            if self.late() or lease is None:
                return
            self.pause(0.5, 2.5)  # work
            if self.rng.random() < 0.5:
                status, _ = self.call("POST", f"goals/{gid}/lease/heartbeat", {"lease": lease})
                if not ok(status):
                    return self.lost(gid, "heartbeat", status)
            incident = self.rng.choices(
                ["none", "end_of_turn", "wake_in_60", "rate_limit", "approval", "crash"],
                weights=[50, 8, 10, 12, 8, 12])[0]
            body: dict[str, Any] = {
                "lease": lease, "current_step": f"step {step} verified",
                "progress_pct": min(99, step * 100 // steps), "completed": [f"step {step}"],
                "next_actions": [f"step {step + 1}"]}
            # An end of turn: a checkpoint that releases, or (half the time)
            # a checkpoint and then the release call.
            release: dict[str, Any] | None = None
            if incident in ("end_of_turn", "wake_in_60"):
                release = {"wake": {"in_seconds": 60}} if incident == "wake_in_60" else {}
                if self.rng.random() < 0.5:
                    body.update(release_lease=True, **release)
                    release = None
            status, answer = self.call("POST", f"goals/{gid}/checkpoints", body)
            if not ok(status):
                return self.lost(gid, "checkpoint", status, answer)
            if release is not None:
                status, answer = self.call("POST", f"goals/{gid}/lease/release",
                                           {"lease": lease, **release})
                if not ok(status):
                    return self.lost(gid, "release", status, answer)
            self.stats.note(f"incident {incident}")
            if incident in ("end_of_turn", "wake_in_60"):
                lease = self.resume(gid, pushed, why=incident, within=WAKE_WITHIN)
            elif incident == "rate_limit":
                status, answer = self.call("POST", f"goals/{gid}/runs", {
                    "lease": lease, "outcome": "error", "retry_after": "3",
                    "error_text": RATE_LIMIT_TEXT})
                if ok(status) and answer.get("status") == "blocked":
                    # The continuation budget is spent; the limit stops the goal.
                    return self.stats.note(f"rate limit stopped the goal ({answer['reason']})")
                if not ok(status) or answer.get("status") != "paused":
                    return self.lost(gid, "rate limit report", status, answer)
                self.pause(3, 5)
                lease = self.resume(gid, pushed, why=incident, within=WAKE_WITHIN)
            elif incident == "approval":
                status, answer = self.call("POST", f"goals/{gid}/approvals", {
                    "lease": lease, "gate": f"deploy-{step}", "summary": "ship it?"})
                if not ok(status):
                    return self.lost(gid, "approval request", status, answer)
                lease = self.after_approval(gid)
            elif incident == "crash":
                # Gone without a word: the lease runs out, the sweeper expires
                # it and arms a timeout_recovery wake due at once.
                crashed = now()
                lease = self.resume(gid, pushed, why=incident,
                                    within=policy["lease_seconds"] + CRASH_WAKE_WITHIN)
                if lease is not None:
                    with self.stats.lock:
                        self.stats.crash_recovery.append(now() - crashed)
        if lease is None or self.late():
            return
        status, answer = self.call("POST", f"goals/{gid}/finish", {
            "lease": lease, "status": "completed", "summary": "all steps done",
            "evidence": [{"criterion": "all steps", "evidence": "every step checkpointed"}]})
        if not ok(status):
            return self.lost(gid, "finish", status, answer)
        self.stats.note("goal finished")

    def lost(self, gid: str, what: str, status: int, answer: dict | None = None) -> None:
        code = (answer or {}).get("code", "")
        self.stats.note(f"gave up a goal: {what} answered {status} {code}".strip())

    def resume(self, gid: str, pushed: bool, *, why: str, within: float) -> dict | None:
        """Wait for the goal's wake: its push (the webhook hands the lease
        over) or, pulled, its `ready` and then the lease call. A wake that has
        not come ``within`` seconds is an anomaly; the agent then takes the
        lease itself."""
        give_up = now() + within
        inbox = self.pushes.inbox(gid) if pushed else None
        while not self.late() and now() < give_up:
            if inbox is not None:
                with contextlib.suppress(queue.Empty):
                    packet = inbox.get(timeout=4)
                    if packet.get("lease"):
                        self.stats.note(f"resumed by a push after {why}")
                        return {"token": packet["lease"]["token"],
                                "generation": packet["lease"]["generation"]}
            status, goal = self.call("GET", f"goals/{gid}")
            if not ok(status):
                return None
            if goal["liveness"] == "needs_human" or goal["liveness"] == "terminal":
                self.stats.note(f"goal ended as {goal['status']}/{goal['reason']} after {why}")
                return None
            if inbox is not None:
                continue  # the push brings the lease
            if goal["ready"] or (goal["status"] == "paused" and goal["paused_until"]
                                 and goal["paused_until"] <= _utcnow()):
                lease = self.take(gid, why)
                if lease is not None:
                    return lease
            self.pause(2, 4)
        if self.late():
            return None
        self.stats.note(f"no wake within {within} s after {why}: took the lease")
        self.stats.anomaly(f"goal {gid}: no wake within {within} s after {why}")
        return self.take(gid, why, wait=60)

    def take(self, gid: str, why: str, wait: float = 0) -> dict | None:
        until = now() + wait
        while True:
            status, answer = self.call("POST", f"goals/{gid}/lease")
            if not ok(status):
                self.stats.note(f"lease call answered {status} {answer.get('code', '')}")
                return None
            if answer.get("acquired"):
                resumed = answer.get("resumed")
                self.stats.note(f"pulled ({resumed['reason']})" if resumed else
                                "took the lease (no wake)")
                if resumed and answer.get("resume_packet") is None:
                    self.stats.anomaly(f"goal {gid}: resumed without a resume_packet")
                return {"token": answer["lease"]["token"],
                        "generation": answer["lease"]["generation"]}
            if answer.get("next_required_action") in ("operator_recover", "start_a_new_goal"):
                return None
            if now() >= until or self.late():
                return None
            time.sleep(min(5, answer.get("retry_after_seconds") or 1))

    def after_approval(self, gid: str) -> dict | None:
        while not self.late():
            self.pause(2, 4)
            status, goal = self.call("GET", f"goals/{gid}")
            if not ok(status):
                return None
            if goal["status"] == "failed":
                self.stats.note("goal failed: its gate was rejected")
                return None
            if goal["status"] != "blocked":
                return self.take(gid, "approval", wait=30)
        return None


def _utcnow() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class Operator(threading.Thread):
    """A human on call: resolves approval gates (one in ten rejected)."""

    def __init__(self, token: str, web: Web, stats: Stats, stop: threading.Event) -> None:
        super().__init__(name="operator", daemon=True)
        self.token, self.web, self.stats, self.stop = token, web, stats, stop
        self.rng = random.Random(7)  # noqa: S311

    def run(self) -> None:
        while not self.stop.wait(self.rng.uniform(2, 6)):
            status, page = self.web.call(self.token, "GET", "goals?reason=BLOCKED_APPROVAL")
            if not ok(status):
                continue
            for goal in page.get("results", []):
                for gate in goal.get("pending_approvals", []):
                    decision = "reject" if self.rng.random() < 0.1 else "approve"
                    status, _ = self.web.call(
                        self.token, "POST",
                        f"goals/{goal['id']}/approvals/{gate['gate']}/resolve",
                        {"decision": decision, "note": "soak operator"})
                    if ok(status):
                        self.stats.note(f"operator: {decision}")


# ------------------------------------------------------------------ the server side


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=env, text=True,
                          capture_output=True, check=False)


def tokens(env: dict[str, str], names: list[str], role: str) -> dict[str, str]:
    done = manage(env, "ledger", "agent", "create", *names, "--role", role)
    if done.returncode:
        raise SystemExit(f"agent create failed: {done.stderr}")
    found = re.findall(r"^(wl_\S+)$", done.stdout, re.MULTILINE)
    if len(found) != len(names):
        raise SystemExit(f"expected {len(names)} tokens: {done.stdout}")
    return dict(zip(names, found, strict=True))


@dataclass
class Process:
    name: str
    popen: subprocess.Popen
    log: Path


def start(name: str, argv: list[str], env: dict[str, str], logs: Path) -> Process:
    log = logs / f"{name}.log"
    with open(log, "wb") as out:
        popen = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    return Process(name, popen, log)


def wait_healthy(port: int, timeout: float = 60) -> None:
    deadline = now() + timeout
    while now() < deadline:
        with contextlib.suppress(OSError):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/api/v1/health")
            if connection.getresponse().status == 200:
                return
        time.sleep(0.5)
    raise SystemExit(f"the web instance on port {port} did not become healthy")


def stop(process: Process, timeout: float = 30) -> float | None:
    """SIGTERM (as systemd's KillMode=mixed sends it); seconds to exit, None
    if it had to be killed."""
    started = now()
    process.popen.send_signal(signal.SIGTERM)
    try:
        process.popen.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.popen.kill()
        process.popen.wait()
        return None
    return now() - started


# ------------------------------------------------------------------ the checks


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def intended_at(occurrence: str) -> datetime | None:
    """A scheduler wake's due time, from its occurrence id
    (internal:<goal>@<iso> or internal:<goal>@<kind>:<iso>)."""
    if not occurrence.startswith("internal:") or "@" not in occurrence:
        return None
    tail = occurrence.split("@", 1)[1]
    tail = tail.split(":", 1)[1] if tail.split(":", 1)[0] in ("requested", "reset") else tail
    with contextlib.suppress(ValueError):
        moment = datetime.fromisoformat(tail)
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return None


def check(env: dict[str, str], stats: Stats, pushes: Pushes, failures: list[str]) -> None:
    os.environ.update(env)
    import django

    django.setup()
    from django.db.models import Count
    from django_q.models import Task

    from ledger.models import Event, Goal

    print("\n== checks ==")
    # 1. Every acknowledged write is an event of its kind.
    from api.idempotency import key_digest

    kinds_by_key: dict[str, set[str]] = defaultdict(set)
    per_key: Counter = Counter()
    keys = [a.key for a in stats.acked if a.expects_event]
    # Events keep a key's digest, never the key: look them up by it.
    by_digest = {key_digest(key): key for key in keys}
    digests = list(by_digest)
    for start_at in range(0, len(digests), 1000):
        for digest, kind in Event.objects.filter(
                idempotency_key__in=digests[start_at:start_at + 1000]).values_list(
                    "idempotency_key", "kind"):
            key = by_digest[digest]
            kinds_by_key[key].add(kind)
            per_key[key, kind] += 1
    twice = [pair for pair, n in per_key.items() if n > 1 and pair[1] in
             {"checkpoint.recorded", "lease.renewed", "run.reported", "goal.started",
              "approval.requested", "approval.resolved", "goal.completed"}]
    verdict(failures, not twice, f"no write recorded twice under one key ({twice[:3]})")
    missing = [a for a in stats.acked if a.expects_event
               and not (kinds_by_key.get(a.key, set()) & WRITES[a.endpoint])]
    acknowledged = sum(a.expects_event for a in stats.acked)
    verdict(failures, not missing,
            f"{acknowledged} acknowledged writes, each an event of its kind"
            + (f"; MISSING {len(missing)}: {[(a.endpoint, a.goal_id) for a in missing[:5]]}"
               if missing else ""))

    # 2. Exactly once.
    granted = (Event.objects.filter(kind="wake.claimed", data__outcome__in=GRANTED)
               .values("goal_id", "data__occurrence_id").annotate(n=Count("id"))
               .filter(n__gt=1))
    charged = (Event.objects.filter(kind="continuation.charged")
               .values("goal_id", "data__occurrence_id").annotate(n=Count("id"))
               .filter(n__gt=1))
    pulled = (Event.objects.filter(kind__in=["lease.acquired", "lease.taken_over"],
                                   data__pulled__isnull=False)
              .values("goal_id", "data__pulled__occurrence_id").annotate(n=Count("id"))
              .filter(n__gt=1))
    generations = (Event.objects.filter(kind__in=["lease.acquired", "lease.taken_over"])
                   .values("goal_id", "data__generation").annotate(n=Count("id"))
                   .filter(n__gt=1))
    twice_pushed = {o: n for o, n in pushes.occurrences.items() if n > 1}
    verdict(failures, not (granted or charged or pulled or generations or twice_pushed),
            "no occurrence granted, charged, pulled or pushed twice; no lease generation "
            f"granted twice (granted twice: {list(granted)[:3]}, charged twice: "
            f"{list(charged)[:3]}, pulled twice: {list(pulled)[:3]}, generations twice: "
            f"{list(generations)[:3]}, pushed twice: {list(twice_pushed.items())[:3]})")
    verdict(failures, pushes.bad_signatures == 0,
            f"every push signed ({pushes.bad_signatures} bad signatures)")

    # 3. The operator commands.
    for args in (("doctor",), ("replay", "--check"), ("verify",)):
        done = manage(env, "ledger", *args)
        last = (done.stdout.strip().splitlines() or [""])[-1]
        verdict(failures, done.returncode == 0,
                f"ledger {' '.join(args)} exit {done.returncode}: {last}"
                + (f"\n{done.stdout[-2000:]}{done.stderr[-2000:]}" if done.returncode else ""))

    # 4. The figures.
    print("\n== figures ==")
    scan_postgres_log()
    goals = Goal.objects.count()
    by_status = Counter(Goal.objects.values_list("status", flat=True))
    print(f"goals: {goals} ({', '.join(f'{k} {v}' for k, v in sorted(by_status.items()))})")
    served = sum(len(v) for v in stats.latency.values())
    print(f"requests served: {served}")
    print("answers by class: " + ", ".join(f"{k}: {v}" for k, v in sorted(stats.outcomes.items())))
    print(f"{'endpoint':48} {'n':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for endpoint, values in sorted(stats.latency.items()):
        print(f"{endpoint:48} {len(values):6} {percentile(values, 50) * 1000:8.1f} "
              f"{percentile(values, 99) * 1000:8.1f} {max(values) * 1000:8.1f}")
    fired = Task.objects.filter(func="scheduling.tasks.fire_watchdog").count()
    claims = Event.objects.filter(kind="wake.claimed", data__source="internal")
    outcomes = Counter(claims.values_list("data__outcome", flat=True))
    dispatched = Counter(Event.objects.filter(kind="continuation.dispatched")
                         .values_list("data__ok", flat=True))
    pulls = Event.objects.filter(kind__in=["lease.acquired", "lease.taken_over"],
                                 data__pulled__isnull=False).count()
    print(f"wakes fired (scheduler tasks): {fired}; claims recorded: {claims.count()} "
          f"({', '.join(f'{k} {v}' for k, v in sorted(outcomes.items()))}); "
          f"pulled by their agent: {pulls}; dispatched: {dispatched.get(True, 0)} ok, "
          f"{dispatched.get(False, 0)} failed; pushes received: "
          f"{sum(pushes.occurrences.values())}; charged: "
          f"{Event.objects.filter(kind='continuation.charged').count()}")
    from scheduling.models import Dispatch

    rows = Counter(Dispatch.objects.values_list("status", flat=True))
    print("outbox rows: " + ", ".join(f"{k} {v}" for k, v in sorted(rows.items())))
    late = []
    for goal_id, occurrence, slot, recorded in claims.values_list(
            "goal_id", "data__occurrence_id", "data__slot", "recorded_at"):
        due = datetime.fromisoformat(slot) if slot else intended_at(occurrence)
        if due is not None:
            late.append(((recorded - due).total_seconds(), str(goal_id)))
    if late:
        worst = max(late)
        print(f"wake lateness (claimed - due), {len(late)} scheduler wakes: p50 "
              f"{percentile([x for x, _ in late], 50):.1f} s, p99 "
              f"{percentile([x for x, _ in late], 99):.1f} s, longest {worst[0]:.1f} s "
              f"(goal {worst[1]})")
    overdue = []
    cutoff = datetime.now(UTC)
    for goal_id, state in Goal.objects.exclude(
            status__in=["completed", "failed", "stopped", "blocked"]).values_list("id", "state"):
        due = _next_due(state)
        if due is not None:
            overdue.append(((cutoff - due).total_seconds(), str(goal_id)))
    if overdue:
        worst = max(overdue)
        print(f"goals still waiting: {len(overdue)}; the most overdue is {worst[0]:.1f} s "
              f"past its next wake (goal {worst[1]}; the scheduler looks every 30 s)")
    if stats.crash_recovery:
        print(f"crash recovery (crash -> resumed), {len(stats.crash_recovery)} crashes: p50 "
              f"{percentile(stats.crash_recovery, 50):.1f} s, p99 "
              f"{percentile(stats.crash_recovery, 99):.1f} s, longest "
              f"{max(stats.crash_recovery):.1f} s (leases of 5-20 s, sweeps every 60 s)")
    print("what the agents lived through: "
          + ", ".join(f"{k} {v}" for k, v in sorted(stats.story.items())))
    verdict(failures, not any(k.startswith(("5", "network")) for k in stats.outcomes),
            "no server error, no network error")
    verdict(failures, not stats.anomalies,
            f"{len(stats.anomalies)} client anomalies"
            + "".join(f"\n    {a}" for a in stats.anomalies[:10]))
    for goal_id in sorted({m.group(0) for a in stats.anomalies[:5] if (m := UUID.search(a))}):
        print(f"  timeline of goal {goal_id}:")
        for seq, kind, at, data in Event.objects.filter(goal_id=goal_id).order_by("seq") \
                .values_list("seq", "kind", "recorded_at", "data"):
            shown = {k: data[k] for k in ("outcome", "reason", "generation", "due_at",
                                          "first_due_at", "until", "expires_at", "slot",
                                          "occurrence_id", "retry_after_seconds") if k in data}
            print(f"    {seq:3} {at:%H:%M:%S.%f} {kind} {shown}")


def _next_due(state: dict) -> datetime | None:
    from ledger.domain.state import GoalState
    from ledger.domain.timing import next_wake_at

    return next_wake_at(GoalState.from_dict(state))


def verdict(failures: list[str], ok: bool, text: str) -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {text}")
    if not ok:
        failures.append(text.splitlines()[0])


def scan_logs(processes: list[Process], failures: list[str]) -> None:
    bad, warnings = [], Counter()
    for process in processes:
        for line in process.log.read_text(errors="replace").splitlines():
            if "Traceback" in line or " ERROR " in line or " CRITICAL " in line:
                bad.append(f"{process.name}: {line[:300]}")
            elif " WARNING " in line:
                warnings[UUID.sub("{id}", line.split(" WARNING ", 1)[1])[:160]] += 1
    verdict(failures, not bad, f"no traceback or ERROR in the processes' logs ({len(bad)} lines)"
            + "".join(f"\n    {line}" for line in bad[:15]))
    print(f"WARNING lines in the processes' logs: {sum(warnings.values())}"
          + "".join(f"\n    {n} x {text}" for text, n in warnings.most_common(8)))


def scan_postgres_log() -> None:
    """The server's own log (next to its data directory): an expected race
    logged at ERROR reads as an alarm to an operator."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW data_directory")
        log = Path(cursor.fetchone()[0]).parent / "server.log"
    errors: Counter = Counter()
    with contextlib.suppress(OSError):
        for line in log.read_text(errors="replace").splitlines():
            if "ERROR:" in line:
                errors[re.sub(r"\(.*", "", line.split("ERROR:", 1)[1]).strip()[:160]] += 1
    print(f"ERROR lines in PostgreSQL's log: {sum(errors.values())}"
          + "".join(f"\n    {n} x {text}" for text, n in errors.most_common(8)))


# ------------------------------------------------------------------ main


def main() -> int:
    seconds = int(os.environ.get("SOAK_SECONDS", "300"))
    count = int(os.environ.get("SOAK_AGENTS", "50"))
    bindir = postgres.find_bindir()
    if bindir is None:
        print("the soak needs PostgreSQL (/usr/lib/postgresql/*/bin)", file=sys.stderr)
        return 1
    logs = ROOT / "var" / "soak" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    logs.mkdir(parents=True, mode=0o700)
    stats, pushes, failures = Stats(), Pushes(), []
    with postgres.server(bindir) as url, receiver(pushes) as hook:
        ports = [postgres.free_port(), postgres.free_port()]
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("WAKELEDGER_")},
            **FAST,
            "DJANGO_SETTINGS_MODULE": "ledger.project.settings",
            "DATABASE_URL": url,
            "SECRET_KEY": secrets.token_urlsafe(50),
            "SITE_URL": f"http://127.0.0.1:{ports[0]}",
            "WAKELEDGER_DISPATCHERS": json.dumps(
                {"hook": {"type": "webhook", "url": hook, "secret": HOOK_SECRET,
                          "timeout": 5}}),
            # Its own file: the dispatchers are written to var/dispatchers.json
            # by default, and this run's webhook port would refuse the next run.
            "WAKELEDGER_DISPATCHERS_FILE": str(logs / "dispatchers.json"),
            "WAKELEDGER_Q_WORKERS": "2",
            # A fresh database each soak: the sealer's record of this run only
            # (one kept in var/ beside the key would cry rollback next time).
            "WAKELEDGER_SEALER_STATE_FILE": str(logs / "sealer.checkpoint"),
            "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
        }
        print(f"soak: {count} agents, {seconds} s; PostgreSQL {bindir.parent.name} at {url}; "
              f"web on {ports}; logs in {logs}", flush=True)
        done = manage(env, "migrate", "--noinput")
        if done.returncode:
            print(done.stdout, done.stderr)
            return 1
        names = [f"agent{n:02d}" for n in range(1, count + 1)]
        agent_tokens = tokens(env, names, "agent")
        operator_token = tokens(env, ["soak-operator"], "operator")["soak-operator"]

        processes = []
        for port in ports:
            own = {**env, "PORT": str(port), "WAKELEDGER_VAR_DIR": str(logs / f"web-{port}")}
            processes.append(start(f"web-{port}", [
                str(BIN / "gunicorn"), "-c", "python:ledger.project.gunicorn_conf",
                "ledger.project.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "2",
                "--access-logfile", "-"],
                own, logs))
        for number in (1, 2):
            own = {**env, "WAKELEDGER_VAR_DIR": str(logs / f"scheduler-{number}")}
            processes.append(start(f"scheduler-{number}", [PYTHON, "manage.py", "scheduler"],
                                   own, logs))
        try:
            for port in ports:
                wait_healthy(port)
            web = Web(ports, stats)
            deadline = now() + seconds
            began = now()
            halt = threading.Event()
            operator = Operator(operator_token, web, stats, halt)
            operator.start()
            agents = [Agent(name, agent_tokens[name], web, pushes, stats, deadline, seed)
                      for seed, name in enumerate(names)]
            for agent in agents:
                agent.start()
            while any(agent.is_alive() for agent in agents):
                time.sleep(5)
                if now() > deadline + 90:
                    stats.anomaly("agents still running 90 s past the deadline")
                    break
            halt.set()
            operator.join(10)
            print(f"agents done after {now() - began:.0f} s", flush=True)
        finally:
            exits = {process.name: stop(process) for process in processes}
        verdict(failures, all(t is not None and t < 15 for t in exits.values()),
                "every process gone after SIGTERM: " + ", ".join(
                    f"{name} {'KILLED' if t is None else f'{t:.1f} s'}"
                    for name, t in exits.items()))
        scan_logs(processes, failures)
        check(env, stats, pushes, failures)
    print(f"\n{'FAILED: ' + '; '.join(failures) if failures else 'soak passed'} "
          f"(logs: {logs})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""The simulated world: goals with their agents, django-q2's scheduler, the
agents' hosts, operators — one seeded ``random.Random`` and one virtual clock
(``ledger.eventstore.clock``) drive all of them, through the real product (``product``).

Everything happens in an event queue ordered by virtual time; ties break in the
order things were queued, so a seed always replays the same history. After
every step the goals it touched are checked (``invariants``); every half hour
of virtual time, after every lease sweep that expired something, and at the
end, every goal is.
"""

import heapq
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ledger.domain import iso
from ledger.eventstore import clock as ledger_clock
from tests.simulation import invariants as inv
from tests.simulation import product
from tests.simulation.product import Lease, Refused, Unsupported

START = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
CHECK_EVERY = timedelta(minutes=30)
# The policy every simulated goal asks for, and the world's own bound on how
# long a goal may go unlisted without progress (World.bound, README).
LEASE_SECONDS = 600
READY_TIMEOUT_MINUTES = 120
HOST_SILENT_SLOTS = 2
PROGRESS_BOUND = timedelta(minutes=60)  # a checkpoint at least this often (smart-wake: 5-15 min)
STALE_GRACE = timedelta(seconds=60)  # the server's (WAKELEDGER_STALE_GRACE_SECONDS) default
MARGIN = timedelta(minutes=30)
# The longest the world lets a pause go without a person told (a weekly limit,
# a reset "on Jan 3"): past it, an unlisted pause counts in the headline.
PAUSE_UNTOLD = timedelta(days=1)
# A weekly limit as a provider states it: "try again in 6 days 23 hours".
WEEKLY_RESET_SECONDS = 6 * 86_400 + 23 * 3_600
# Agents whose activity is not progress (docs/liveness.md): each a share of
# the eventful goals, active for a while after the goal starts.
ACTORS = ("churn", "looper", "dummy_jobs", "weekly_limit")
REPLAY_EVERY = timedelta(hours=6)


class SteppableClock(ledger_clock.FrozenClock):
    """The world's virtual time (``current``), read by the product through an
    ``offset``: a server clock that runs ahead of the world's while it is set
    (World.clock_jumps). The world itself always reads ``current``."""

    def __init__(self, start: datetime):
        super().__init__(start)
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return self.current + self.offset


@dataclass
class Config:
    seed: int
    days: float = 7.0
    goals: int = 30
    # Probabilities per chunk of work, for goals that are not "healthy".
    crash: float = 0.03
    rate_limit: float = 0.03
    auth: float = 0.004
    unclassified: float = 0.004
    approval: float = 0.015
    ci_job: float = 0.05
    requested_wake: float = 0.3  # an end of turn asks "wake me in 1-10 minutes"
    ci_notify: float = 0.5  # a CI job reports its end with its notify token
    agent_blocked: float = 0.1  # a finish as blocked (AGENT_BLOCKED), per finish
    healthy_share: float = 0.35  # goals whose agent always succeeds (PROGRESS checks them)
    host_share: float = 0.3  # goals whose watchdog the agent's host owns
    outages_per_day: float = 0.4  # django-q2 scheduler outages of 1-6 hours
    host_early: float = 0.1  # a host fire up to 30 s early (else late by up to 5 min)
    host_double: float = 0.07  # a host fires the same slot twice
    # Silent failures: a host that drops its task silently (once per goal),
    # an agent that dies while it waits on CI, operators that damage rows.
    host_stops: float = 0.15  # host goals whose host silently stops firing at some point
    ci_crash: float = 0.15  # a CI wait during which the agent dies
    row_damage_per_day: float = 1.0  # a watchdog row deleted or exhausted by hand
    # Actors for what the world once never exercised.
    host_only: float = 0.5  # host goals whose agent runs only when its host fires
    hang: float = 0.004  # per chunk: the agent hangs; its client keeps renewing the lease
    hang_hours: tuple[float, float] = (1.0, 8.0)
    bad_due_at: float = 0.15  # a host receipt's due_at is wrong (typo, time zone, year)
    slow_operator: float = 0.3  # a listing an operator leaves for 6 hours to 4 days
    long_outage: bool = True  # worlds of 7 days or more: django-q2 down 1-3 days once
    db_outages_per_day: float = 0.5  # the database unreachable for 1-15 minutes
    poisoned: float = 0.0  # internal goals whose wake task raises every time
    push: float = 0.25  # internal goals whose wakes a webhook dispatcher pushes to the agent
    # (start, length) in hours: every agent's calls fail authentication (a
    # revoked provider key): a burst of goals needing a human at once.
    auth_burst: tuple[float, float] | None = None
    planted: tuple[str, ...] = ()  # product bugs planted for a test (product.planted)
    progress: bool = False  # one line per simulated day on stderr (long worlds from make simulate)
    sweeper_row_deleted_at: float | None = None  # hours: an admin deletes the sweeper's row
    start_within: float = 12.0  # hours over which the first goals start
    # The clock step (World.clock_jumps; docs/liveness.md, "A clock stepped
    # back"): (share of the world's length at which the server's clock jumps
    # ahead, hours ahead, minutes before it is set back); None: the clock
    # never jumps.
    clock_step: tuple[float, float, float] | None = (0.4, 8.0, 2.5)

    # Holders and a provider that misbehave, each a share of the eventful goals: a holder that
    # releases and retakes its lease every minute, never a checkpoint
    # (churn); one that records the same checkpoint at every wake (looper);
    # one that tracks a job and reports it done every 50 minutes (dummy_jobs);
    # and a provider that always answers "try again in 6 days 23 hours"
    # (weekly_limit). For actor_hours after its start (the weekly limit for
    # the goal's life).
    churn: float = 0.04
    looper: float = 0.04
    dummy_jobs: float = 0.04
    weekly_limit: float = 0.04
    actor_hours: tuple[float, float] = (4.0, 24.0)
    # Operators who see a goal paused more than 6 hours (its page, the goal
    # list) and try to wake it; 0: they read /alerts only (docs/liveness.md,
    # "Operators who wake long pauses").
    wake_long_pauses: float = 0.3


# ------------------------------------------------------------------ failure texts


def _texts() -> tuple[list[tuple[str, str, str]], list[str], list[str]]:
    """Real provider texts from tests/domain/test_failures.py: rate limits (with their
    Retry-After and zone), authentication failures, unclassified failures."""
    from ledger.domain.failures import AUTH, RATE_LIMIT, UNCLASSIFIED, classify
    from tests.domain.test_failures import CLASSIFICATIONS, RESETS

    limits = [(text, retry_after or "", tz) for text, retry_after, tz, _now, _ in RESETS
              if classify(text) == RATE_LIMIT]
    limits += [(text, "", "UTC") for text, cls in CLASSIFICATIONS if cls == RATE_LIMIT]
    # A bare 429 with the Retry-After values providers send.
    limits += [("HTTP/1.1 429 Too Many Requests", value, "UTC")
               for value in ("30", "120", "900", "3600")]
    auth = [text for text, cls in CLASSIFICATIONS if cls == AUTH]
    other = [text for text, cls in CLASSIFICATIONS if cls == UNCLASSIFIED and text]
    return limits, auth, other


# ------------------------------------------------------------------ actors


@dataclass
class HostSchedule:
    """A host's own recurring task for a goal (an OpenClaw cron job, a ChatGPT task)."""

    ref: str
    anchor: datetime
    interval: timedelta
    passes_ids: bool  # the host sends its run's id as occurrence_id
    active: bool = True
    # The last slot whose fire never reached the product (the host missed it,
    # or the claim was refused): the world's own knowledge of the host's
    # health, for "listed HOST_SILENT while its host was healthy".
    last_missed: datetime | None = None

    def healthy(self, now: datetime) -> bool:
        """The world's own view: the task exists and every slot of the last
        ``HOST_SILENT_SLOTS`` + 1 intervals reached the product. (The product
        lists HOST_SILENT after ``HOST_SILENT_SLOTS`` missed slots; a listing
        earned by misses ends at the next fire, within an interval.)"""
        quiet = (HOST_SILENT_SLOTS + 1) * self.interval
        return self.active and (self.last_missed is None or now - self.last_missed > quiet)


@dataclass
class GoalSim:
    """One goal and its agent."""

    slot: int
    goal_id: str
    agent: str
    scheduler: str
    cadence: int  # minutes
    turns_needed: int
    healthy: bool
    started_at: datetime
    turns_done: int = 0
    progress: int = 0
    lease: Lease | None = None
    turn: int = 0  # bumped when a turn ends: queued actions of an older turn are void
    mode: str = "idle"  # idle | working | waiting_ci | done
    idle_polls: int = 0  # fruitless looks since the last turn: the agent backs off
    last_turn_end: str = ""
    host: HostSchedule | None = None
    crashed: set[int] = field(default_factory=set)  # generations whose holder went silent
    handed: set[int] = field(default_factory=set)  # generations a simulated actor received
    blocked_seen: set[tuple[str, int]] = field(default_factory=set)
    schedule_facts: tuple[object, ...] = ()  # what the goal's schedule rows follow
    overdue_since: datetime | None = None  # when /alerts first listed it OVERDUE
    damaged_at: datetime | None = None  # when its watchdog row was last damaged by hand
    row_missing_since: datetime | None = None  # first seen waiting on a missing row
    jobs: int = 0
    notes: list[tuple[datetime, str]] = field(default_factory=list)
    monitor: inv.GoalMonitor | None = None
    ended: bool = False
    host_only: bool = False  # acts only when its host fires (or a human asks it)
    poisoned: bool = False  # its wake task raises every time (planted)
    push: bool = False  # its wakes are pushed (product.PUSH) with the lease they grant
    undelivered: dict[int, datetime] = field(default_factory=dict)  # pushed generations due
    # Judged from outside: the last progress its agent saw succeed
    # (start, checkpoint, finish), the last time /alerts listed it, and the
    # end of a wait the world itself caused and knows (a rate limit's reset).
    last_progress: datetime | None = None
    last_listed: datetime | None = None
    excused_until: datetime | None = None
    listing: tuple[str, datetime] | None = None  # (reason, since) while /alerts lists it
    hung_until: datetime | None = None
    # Which of ACTORS its agent is ("" for none), and until when it acts so.
    actor: str = ""
    actor_until: datetime | None = None
    # The product accepted a receipt whose due_at the world knows was wrong:
    # its slots are no longer the host's, so no_drift cannot judge the fires
    # (the headline still judges the goal).
    wrong_anchor: str = ""  # which slip: typo, time_zone, year
    # A hang the world injected, kept until the goal's next progress (the
    # headline's cause; a wrong anchor lasts until the next right receipt).
    injected: str = ""
    listed_for: timedelta = timedelta()  # time /alerts asked a human to look at it
    # Time its host cost it (missed slots, the silence before HOST_SILENT and
    # the re-created task's first slot): not the agent's, nor the product's.
    host_delay: timedelta = timedelta()
    # When a READY_UNCLAIMED block was recorded while the server clock ran
    # ahead: judged on the wrong clock, the product withdraws it at the first
    # command after the clock is set back (ledger.domain.clocksteps); a
    # violation only if it still stands half an hour after that.
    blocked_ahead: datetime | None = None

    @property
    def interval(self) -> timedelta:
        return timedelta(minutes=self.cadence)


@dataclass
class Fire:
    goal_id: str
    name: str
    intended: datetime
    at: datetime
    outcome: str
    duplicate: bool
    paused: bool


@dataclass
class Report:
    seed: int
    days: float
    goals: int
    goals_started: int = 0
    goal_days: float = 0.0  # virtual time goals spent non-terminal
    steps: int = 0
    checks: int = 0
    fires: int = 0
    claims: dict[str, int] = field(default_factory=dict)
    endings: dict[str, int] = field(default_factory=dict)
    acts: dict[str, int] = field(default_factory=dict)  # what the actors did, by kind
    violations: list[inv.Violation] = field(default_factory=list)
    # Liveness by evidence, sampled every check: active goal-hours, the hours
    # a goal worked (a live lease), and the hours past its own deadline —
    # listed in /alerts (by reason) or not (must be 0).
    active_hours: float = 0.0
    working_hours: float = 0.0
    visible_stuck: dict[str, float] = field(default_factory=dict)  # listed hours by reason
    invisible_stuck_hours: float = 0.0  # past the product's own deadline and unlisted
    # The headline: hours goals spent unlisted with no progress
    # beyond the world's own bound (World.bound); must be 0.
    unseen_hours: float = 0.0
    unseen_goals: set[str] = field(default_factory=set)
    # What the world knows was wrong with those goals (its own injections):
    # hours by cause, to tell which product fix each part of the figure needs.
    unseen_causes: dict[str, float] = field(default_factory=dict)
    longest_listing: tuple[float, str, str] = (0.0, "", "")  # hours, reason, goal
    # Goal-hours /alerts listed HOST_SILENT while the world knew the goal's
    # host task existed and every recent slot's fire reached the product
    # (HostSchedule.healthy): a listing that asks a human to check a host
    # that works. Should be ~0. By goal, for the trace of the worst.
    host_silent_healthy: dict[str, float] = field(default_factory=dict)
    host_silent_trace: str = ""  # the worst such goal's trace (__main__ prints it)
    most_listed: int = 0  # goals /alerts listed at once, at most
    alerts_pages: int = 0  # pages of the longest /alerts read
    alerts_count_mismatch: int = 0  # reads whose announced count differed from the rows
    task_failures: int = 0  # django-q2 tasks that failed (Task success=False)
    db_refusals: int = 0  # actor steps that met the unreachable database and retried

    @property
    def progress_share(self) -> float:
        return self.working_hours / self.active_hours if self.active_hours else 0.0

    def by_invariant(self, name: str) -> list[inv.Violation]:
        return [v for v in self.violations if v.invariant == name]

    def summary(self) -> str:
        lines = [f"seed {self.seed}: {self.goals} goal slots x {self.days:g} days, "
                 f"{self.goals_started} goals, {self.goal_days:.0f} active goal-days, "
                 f"{self.steps} steps, {self.checks} invariant checks, {self.fires} fires",
                 f"  claims: {dict(sorted(self.claims.items()))}",
                 f"  endings: {dict(sorted(self.endings.items()))}",
                 f"  acts: {dict(sorted(self.acts.items()))}",
                 f"  HEADLINE: {self.unseen_hours:.1f} goal-hours unlisted without progress "
                 f"beyond the world's bound ({len(self.unseen_goals)} goal(s); by what the "
                 f"world injected: "
                 f"{ {k: round(v, 1) for k, v in sorted(self.unseen_causes.items())} })",
                 f"  listed in /alerts, goal-hours by reason: "
                 f"{ {k: round(v, 1) for k, v in sorted(self.visible_stuck.items())} }; "
                 f"longest listing {self.longest_listing[0]:.1f} h "
                 f"({self.longest_listing[1] or '-'} {self.longest_listing[2][:8]}); "
                 f"at most {self.most_listed} listed at once "
                 f"({self.alerts_pages} page(s), {self.alerts_count_mismatch} count mismatches)",
                 f"  listed HOST_SILENT while the world's host was healthy: "
                 f"{sum(self.host_silent_healthy.values()):.1f} goal-hours "
                 f"({len(self.host_silent_healthy)} goal(s)"
                 + (f"; most {max(self.host_silent_healthy.values()):.1f} h, goal "
                    f"{max(self.host_silent_healthy, key=self.host_silent_healthy.__getitem__)[:8]}"
                    if self.host_silent_healthy else "") + ")",
                 f"  past own deadline and unlisted: {self.invisible_stuck_hours:.1f} goal-hours; "
                 f"progress share {self.progress_share:.0%} of "
                 f"{self.active_hours:.0f} active goal-hours; "
                 f"{self.task_failures} failed django-q2 tasks; "
                 f"{self.db_refusals} steps retried after the database was down"]
        counts: dict[str, int] = {}
        for v in self.violations:
            counts[v.invariant] = counts.get(v.invariant, 0) + 1
        for name, count in sorted(counts.items()):
            first = self.by_invariant(name)[0]
            lines.append(f"  VIOLATED {name} ({count} goal(s)); first: {first.headline()}")
        return "\n".join(lines)


# ------------------------------------------------------------------ the world


class World:
    def __init__(self, config: Config):
        self.config = config
        self.rng = random.Random(config.seed)  # noqa: S311 (a seeded world, not secrets)
        self.clock = SteppableClock(START)
        self.end = START + timedelta(days=config.days)
        self.queue: list[tuple[datetime, int, Callable[..., None], tuple[Any, ...]]] = []
        self.seq = 0
        self.goals: dict[str, GoalSim] = {}
        self.report = Report(config.seed, config.days, config.goals)
        self.fires: list[Fire] = []
        self.outages = self._outages()
        self.limits, self.auth_texts, self.other_texts = _texts()
        self.violated: set[tuple[str, str]] = set()  # (invariant, goal) reported once
        self.touched: set[str] = set()
        self.replayed: dict[str, int] = {}  # goal -> version at its last replay
        self._schedules: list[Any] | None = None  # every FIRE row, while unchanged
        self.db_outages = self._db_outages()
        # When the product's sweeper completed passes, and its silences (a
        # stale lease in one is given the product's reconnect grace).
        self.last_sweep: datetime | None = None
        # The first sweep on the real clock after a clock step: only a command
        # (the sweep's, nearly always) records the correction, and django-q2
        # may be down when the clock is set back.
        self.swept_after_step: datetime | None = None
        self.set_back_at: datetime | None = None
        self.sweep_silences: list[tuple[datetime, datetime]] = []
        self.poisoned: set[str] = set()  # goal ids whose wake task raises (product.planted)
        self.reader: product.Api | None = None  # the dashboard's bearer token (an operator)

    def active(self) -> list[str]:
        return sorted(goal_id for goal_id, goal in self.goals.items() if not goal.ended)

    def schedules(self, goal_id: str | None = None) -> list[Any]:
        """django-q2's rows, re-read only after something changed them."""
        if self._schedules is None:
            self._schedules = product.schedules()
        if goal_id is None:
            return self._schedules
        return [row for row in self._schedules if row.goal_id == goal_id]

    # -------------------------------------------------------------- queue

    def at(self, when: datetime, action: Callable[..., None], *args: Any) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (when, self.seq, action, args))

    def after(self, delay: timedelta, action: Callable[..., None], *args: Any) -> None:
        self.at(self.now + delay, action, *args)

    @property
    def now(self) -> datetime:
        return self.clock.current

    def minutes(self, low: float, high: float) -> timedelta:
        return timedelta(seconds=self.rng.uniform(low * 60, high * 60))

    def count(self, act: str) -> None:
        self.report.acts[act] = self.report.acts.get(act, 0) + 1

    def note(self, goal: GoalSim, text: str) -> None:
        goal.notes.append((self.now, text))

    def token(self) -> str:
        return f"wll_sim_{self.rng.getrandbits(128):032x}"

    # -------------------------------------------------------------- run

    def run(self) -> Report:
        with ledger_clock.use(self.clock), product.seeded_ids(self.config.seed), \
                product.planted(self.config.planted, self.poisoned), \
                product.push_dispatcher(self.receive_push), product.quiet_requests():
            product.new_world()
            for slot in range(self.config.goals):
                self.at(START + self.minutes(0, self.config.start_within * 60),
                        self.start_goal, slot)
            self.at(START + timedelta(seconds=30), self.scheduler_tick)
            product.rewind_housekeeping(START)  # the sweeper's and repair's rows
            self.at(START + CHECK_EVERY, self.periodic_check)
            self.at(START + timedelta(minutes=20), self.operator_tick)
            self.at(START + self.minutes(60, 24 * 60), self.damage_tick)
            if self.config.sweeper_row_deleted_at is not None:
                self.at(START + timedelta(hours=self.config.sweeper_row_deleted_at),
                        self.delete_sweeper_row)
            if self.config.clock_step is not None:
                self.at(START + self.config.clock_step[0] * (self.end - START),
                        self.clock_jumps)
            day, began, names = 0, time.perf_counter(), Counter[str]()
            while self.queue and self.queue[0][0] <= self.end:
                when, _seq, action, args = heapq.heappop(self.queue)
                self.clock.current = max(self.clock.current, when)
                if self.config.progress:
                    names[getattr(action, "__name__", "")] += 1
                    if self.now - START >= timedelta(days=day + 1):
                        day = (self.now - START).days
                        busiest = ", ".join(f"{n} {c}" for n, c in names.most_common(3))
                        print(f"  day {day}: {self.report.steps} steps ({busiest}), "
                              f"{time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
                        names.clear()
                self.touched = set()
                self.step(action, args)
                self.report.steps += 1
                for goal_id in sorted(self.touched):
                    self.check_goal(goal_id)
            self.clock.current = self.end
            self.final_check()
        return self.report

    # The world's own steps: they observe, and keep running while the database
    # is down (the world is no client of it). Ticks queue their successor
    # first: one that meets the unreachable database is simply skipped.
    def step(self, action: Callable[..., None], args: tuple[Any, ...]) -> None:
        name = getattr(action, "__name__", "")
        down_until = self.db_down(self.now)
        if down_until is None or name in ("periodic_check",):
            action(*args)
            return
        try:
            with product.database_down():
                action(*args)
        except Exception as error:
            if not product.is_database_down(error):
                raise
            self.report.db_refusals += 1
            # A tick has already queued its successor: retrying it as well
            # would start a second chain of it at every outage.
            if name in ("scheduler_tick", "operator_tick", "damage_tick", "notify_watch"):
                return
            # A real client retries: after the outage, with jitter.
            self.at(down_until + timedelta(seconds=self.rng.uniform(1, 120)), action, *args)

    def db_down(self, moment: datetime) -> datetime | None:
        return _outage_end(self.db_outages, moment)

    def _db_outages(self) -> list[tuple[datetime, datetime]]:
        rng = random.Random(self.config.seed * 7919 + 2)  # noqa: S311 (its own stream)
        outages, day = [], 0
        while day < self.config.days:
            if rng.random() < self.config.db_outages_per_day:
                start = START + timedelta(days=day, hours=rng.uniform(0, 24))
                outages.append((start, start + timedelta(minutes=rng.uniform(1, 15))))
            day += 1
        return outages

    # -------------------------------------------------------------- goals and agents

    def start_goal(self, slot: int) -> None:
        rng = self.rng
        goal_id = str(_uuid(rng))
        healthy = rng.random() < self.config.healthy_share
        push = rng.random() < self.config.push
        goal = GoalSim(
            slot=slot, goal_id=goal_id, agent=f"agent-{slot:02d}",
            scheduler="host" if rng.random() < self.config.host_share else "internal",
            cadence=rng.choice([15, 30, 60, 60, 60, 120]),
            turns_needed=rng.randint(3, 30), healthy=healthy, started_at=self.now)
        goal.push = push and goal.scheduler == "internal"
        policy: dict[str, Any] = {"dispatch": product.PUSH} if goal.push else {}
        token = self.token()
        try:
            gid, answer = product.run_goal(
                goal_id=goal_id, agent=goal.agent, workspace=f"/srv/sim/slot-{slot:02d}",
                goal_key=f"task-{self.report.goals_started}", objective="simulated work",
                steps=["plan", "work", "verify"], session_key=f"sim-{goal_id}",
                policy={"scheduler": goal.scheduler, "cadence_minutes": goal.cadence,
                        "lease_seconds": LEASE_SECONDS,
                        "ready_timeout_minutes": READY_TIMEOUT_MINUTES,
                        "host_silent_slots": HOST_SILENT_SLOTS, **policy}, token=token)
        except Refused as refused:
            self.violation(inv.PROGRESS, goal_id, f"run_goal refused: {refused}")
            return
        goal.goal_id = gid
        goal.monitor = inv.GoalMonitor(gid)
        goal.last_progress = self.now
        goal.host_only = goal.scheduler == "host" and rng.random() < self.config.host_only
        if goal.scheduler == "internal" and rng.random() < self.config.poisoned:
            goal.poisoned = True
            self.poisoned.add(gid)
            self.count("poisoned_goal")
        self.cast(goal)
        self.goals[gid] = goal
        self.report.goals_started += 1
        self.touched.add(gid)
        self.note(goal, f"agent starts ({'healthy' if healthy else 'eventful'}, "
                        f"{goal.turns_needed} turns, {goal.scheduler} every {goal.cadence} min"
                        f"{', runs only when its host fires' if goal.host_only else ''}"
                        f"{', its wake task is poisoned' if goal.poisoned else ''}"
                        f"{', its wakes are pushed' if goal.push else ''}"
                        f"{f', acts as {goal.actor}' if goal.actor else ''})")
        if not answer.acquired or answer.lease is None:
            self.violation(inv.PROGRESS, gid, "a new goal's run_goal did not grant its lease")
            return
        goal.handed.add(answer.lease.generation)
        goal.lease = answer.lease
        # The watchdog first (the skill: wakes are needed when work outlives a turn).
        watchdog = self.call(goal, product.prepare_watchdog, goal.goal_id, goal.agent, goal.lease)
        if watchdog and goal.scheduler == "host":
            self.host_creates(goal, watchdog)
        self.begin_turn(goal, goal.lease)

    def cast(self, goal: GoalSim) -> None:
        """Whether the goal's agent is one of ACTORS, drawn from its own
        stream (a world without them replays as before)."""
        if goal.healthy:
            return
        rng = random.Random(f"{self.config.seed}:{goal.goal_id}:actor")  # noqa: S311
        roll = rng.random()
        for actor in ACTORS:
            share = getattr(self.config, actor)
            if roll < share:
                low, high = self.config.actor_hours
                goal.actor = actor
                goal.actor_until = (self.end if actor == "weekly_limit"
                                    else self.now + timedelta(hours=rng.uniform(low, high)))
                goal.injected = actor
                self.count(f"actor_{actor}")
                return
            roll -= share

    def acting(self, goal: GoalSim, actor: str) -> bool:
        return goal.actor == actor and goal.actor_until is not None \
            and self.now < goal.actor_until

    def host_creates(self, goal: GoalSim, watchdog: dict[str, Any]) -> None:
        """The agent's host creates the schedule it was given and reports the receipt."""
        ref = f"host-task-{self.rng.getrandbits(48):012x}"
        due = datetime.fromisoformat(watchdog["first_due_at"])
        goal.host = HostSchedule(ref, due, goal.interval, passes_ids=self.rng.random() < 0.5)
        goal.wrong_anchor = ""
        if not goal.healthy and self.rng.random() < self.config.bad_due_at \
                and self.bad_receipt(goal, ref, due):
            pass  # the product took the wrong due_at; the agent never knows
        else:
            self.call(goal, product.host_receipt, goal.goal_id, goal.agent, goal.lease,
                      status="created", host_ref=ref, due_at=watchdog["first_due_at"])
        self.at(due, self.host_slot, goal, goal.host, 0)
        if self.rng.random() < self.config.host_stops:
            self.after(self.minutes(60, 3 * 24 * 60), self.host_drops, goal, goal.host)

    def bad_receipt(self, goal: GoalSim, ref: str, due: datetime) -> bool:
        """The agent copies the host's answer wrong: a typo in the minutes, a time
        zone slip of hours, a year ahead. Whether the product accepted it (else
        the agent reads the refusal and sends the right one)."""
        kind, shift = self.rng.choice([
            ("typo", timedelta(minutes=self.rng.choice([-40, -20, 10, 30, 50]))),
            ("time_zone", timedelta(hours=self.rng.choice([-8, -5, -1, 1, 3, 9]))),
            ("year", timedelta(days=365))])
        self.count("receipt_bad_due_at")
        wrong = (due + shift).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            product.host_receipt(goal.goal_id, goal.agent, goal.lease, status="created",
                                 host_ref=ref, due_at=wrong)
        except Refused as refused:
            self.count("receipt_bad_due_at_refused")
            self.note(goal, f"receipt with a wrong due_at ({kind}: {wrong}) refused "
                            f"({refused.code}); the agent sends the host's own")
            return False
        self.count("receipt_bad_due_at_accepted")
        goal.wrong_anchor = kind
        self.note(goal, f"receipt with a wrong due_at ({kind}: {wrong}) accepted")
        return True

    def host_drops(self, goal: GoalSim, host: HostSchedule) -> None:
        """The host loses the goal's task (a restart, a user, a quota): no receipt."""
        if goal.host is host and host.active and not goal.ended:
            host.active = False
            goal.host_delay += (HOST_SILENT_SLOTS + 1.5) * host.interval
            self.count("host_drops_task")
            self.note(goal, "the host silently drops its task")

    def host_recreates(self, goal: GoalSim) -> None:
        """HOST_SILENT: the agent's next contact was told to check its host task.
        It finds it gone: records so, prepares the watchdog again, and the host
        creates the new task (then the agent releases its lease)."""
        try:
            answer = product.pull(goal.goal_id, goal.agent, self.token())
        except Refused as refused:
            self.note(goal, f"re-creating the host task: pull refused ({refused.code})")
            return
        if not answer.acquired or answer.lease is None:
            if goal.host_only:  # the human asks again a little later
                self.after(self.minutes(10, 30), self.host_recreates, goal)
            else:
                self.after(self.minutes(10, 30), self.agent_poll, goal, goal.turn)
            return
        goal.handed.add(answer.lease.generation)
        goal.lease = answer.lease
        if goal.host is not None:
            goal.host.active = False
        self.count("host_recreated")
        goal.host_delay += 1.5 * goal.interval  # the detection's lateness and the first slot
        self.note(goal, "agent told HOST_SILENT: its host task is gone; it re-creates it")
        self.call(goal, product.host_receipt, goal.goal_id, goal.agent, goal.lease,
                  status="user_attested_deleted")
        watchdog = self.call(goal, product.prepare_watchdog, goal.goal_id, goal.agent,
                             goal.lease)
        if watchdog and watchdog.get("status") == "requested":
            self.host_creates(goal, watchdog)
        if goal.lease is not None:
            self.call(goal, product.release, goal.goal_id, goal.agent, goal.lease)
        self.end_turn(goal, "host task re-created")

    def begin_turn(self, goal: GoalSim, lease: Lease) -> None:
        # Read before the agent changes anything: a step that meets the
        # unreachable database is retried whole after the outage (``step``),
        # and one that had already moved ``goal.turn`` found its retry stale
        # and left the agent "working" on nothing (seed 2, 30 days: a pushed
        # lease nobody renewed, blocked INTERRUPTED_UNKNOWN by the world itself).
        inspect = product.jobs_to_inspect(product.load(goal.goal_id))
        goal.turn += 1
        goal.lease = lease
        goal.mode = "working"
        goal.idle_polls = 0
        # The resume packet's jobs_to_inspect: a dead holder's CI runs. The
        # agent looks each one up and reports how it went.
        for job in inspect:
            status = "succeeded" if self.rng.random() < 0.7 else "failed"
            self.count("job_inspected")
            self.call(goal, product.update_job, goal.goal_id, goal.agent, lease,
                      job_id=job["job_id"], status=status)
            self.note(goal, f"agent inspects {job['job_id']} left by a dead holder: {status}")
        for actor, act in (("churn", self.churn), ("looper", self.loop_turn),
                           ("dummy_jobs", self.dummy_job)):
            if self.acting(goal, actor):
                goal.injected = actor
                self.note(goal, f"turn begins as {actor} (generation {lease.generation})")
                self.after(self.minutes(0.5, 2), act, goal, goal.turn)
                return
        chunks = self.rng.randint(1, 3)
        self.note(goal, f"turn {goal.turns_done + 1}/{goal.turns_needed} begins "
                        f"(generation {lease.generation}, {chunks} chunk(s))")
        self.after(self.minutes(2, 8), self.work_chunk, goal, goal.turn, chunks)

    def end_turn(self, goal: GoalSim, why: str) -> None:
        goal.turn += 1
        goal.lease = None
        goal.mode = "idle"
        goal.last_turn_end = self.now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        self.note(goal, f"turn ends: {why}")
        self.after(self.minutes(3, 15), self.agent_poll, goal, goal.turn)

    def call(self, goal: GoalSim, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A product call by ``goal``'s agent: None when refused (the agent stops its
        turn, as the skill says for lease_lost and goal_terminal)."""
        self.touched.add(goal.goal_id)
        try:
            answer = fn(*args, **kwargs)
        except Refused as refused:
            self.note(goal, f"{fn.__name__} refused: {refused.code}")
            if goal.mode in ("working", "waiting_ci"):
                self.end_turn(goal, f"refused with {refused.code}")
            return None
        if fn in (product.checkpoint, product.finish):
            goal.last_progress = self.now  # progress, as the agent saw it succeed
            goal.injected = ""
        return answer

    def work_chunk(self, goal: GoalSim, turn: int, left: int) -> None:
        if turn != goal.turn or goal.lease is None:
            return
        lease, rng, config = goal.lease, self.rng, self.config
        if self.call(goal, product.heartbeat, goal.goal_id, goal.agent, lease) is None \
                and goal.turn != turn:
            return
        eventful = not goal.healthy
        if eventful and rng.random() < config.hang:
            self.hang(goal, turn, left)
            return
        if self.auth_burst():
            goal.healthy = False  # the world broke it: PROGRESS no longer applies
            self.count("auth_burst_failure")
            self.call(goal, product.report_run, goal.goal_id, goal.agent, lease,
                      error_text=rng.choice(self.auth_texts))
            if goal.turn == turn:
                self.end_turn(goal, "authentication failed (the provider key was revoked)")
            return
        if self.acting(goal, "weekly_limit"):
            self.count("weekly_limit")
            answer = self.call(goal, product.report_run, goal.goal_id, goal.agent, lease,
                               error_text="HTTP/1.1 429 Too Many Requests",
                               retry_after=str(WEEKLY_RESET_SECONDS))
            if answer is not None:
                self.note(goal, f"weekly limit: try again in 6 days 23 hours -> "
                                f"{answer['status']} until {answer['paused_until']}")
                self.excuse(goal, answer["paused_until"], str(WEEKLY_RESET_SECONDS))
                if goal.turn == turn:
                    self.end_turn(goal, "weekly limit")
            return
        if eventful and rng.random() < config.crash:
            goal.crashed.add(lease.generation)
            self.count("crash")
            self.note(goal, f"agent crashes silently holding generation {lease.generation}")
            zombie = lease
            goal.turn += 1
            goal.lease = None
            goal.mode = "idle"
            goal.last_turn_end = self.now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            if rng.random() < 0.4:
                self.after(self.minutes(2, 90), self.zombie_write, goal, zombie)
            self.after(self.minutes(10, 40), self.agent_poll, goal, goal.turn)
            return
        if eventful and rng.random() < config.rate_limit:
            text, retry_after, tz = rng.choice(self.limits)
            self.count("rate_limit")
            answer = self.call(goal, product.report_run, goal.goal_id, goal.agent, lease,
                               error_text=text, retry_after=retry_after, tz=tz)
            if answer is not None:
                self.note(goal, f"rate limited: {text[:60]!r} retry_after={retry_after!r} -> "
                                f"{answer['status']} until {answer['paused_until']}")
                self.excuse(goal, answer["paused_until"], retry_after)
                self.end_turn(goal, "rate limited")
            return
        if eventful and rng.random() < config.auth:
            self.count("auth_failure")
            self.call(goal, product.report_run, goal.goal_id, goal.agent, lease,
                      error_text=rng.choice(self.auth_texts))
            if goal.turn == turn:
                self.end_turn(goal, "authentication failed")
            return
        if eventful and rng.random() < config.unclassified:
            self.count("unclassified_failure")
            self.call(goal, product.report_run, goal.goal_id, goal.agent, lease,
                      error_text=rng.choice(self.other_texts))
            if goal.turn == turn:
                self.end_turn(goal, "unclassified failure reported")
            return
        if eventful and rng.random() < config.approval:
            gate = f"gate-{goal.turns_done}-{rng.randint(0, 999)}"
            self.count("approval_request")
            self.call(goal, product.checkpoint, goal.goal_id, goal.agent, lease,
                      step=f"before {gate}", pct=goal.progress, next_actions=["wait for gate"])
            if goal.turn != turn:
                return
            self.call(goal, product.request_approval, goal.goal_id, goal.agent, lease, gate)
            if goal.turn == turn:
                self.end_turn(goal, f"asked for approval {gate}")
            return
        if eventful and rng.random() < config.ci_job:
            goal.jobs += 1
            self.count("ci_job")
            job_id = f"job-{goal.jobs}"
            notify = rng.random() < config.ci_notify
            tracked = self.call(goal, product.track_job, goal.goal_id, goal.agent, lease,
                                job_id=job_id, ref=f"ci-run-{rng.getrandbits(32)}",
                                notify=notify)
            if tracked is None and goal.turn != turn:
                return
            done_in = self.minutes(5, 45)
            if notify and tracked is not None:
                # End the turn; CI reports the end with the job's own
                # token, and the waiting goal is woken (dependency_ready).
                self.count("ci_notify")
                self.call(goal, product.release, goal.goal_id, goal.agent, lease)
                if goal.turn == turn:
                    self.end_turn(goal, f"waits for CI {job_id} (notify token)")
                self.after(done_in, self.ci_reports, goal, job_id, tracked)
                return
            goal.mode = "waiting_ci"
            self.note(goal, f"tracks CI {job_id}, done in {done_in.total_seconds() / 60:.0f} min")
            self.after(timedelta(minutes=4), self.ci_wait, goal, turn, job_id,
                       self.now + done_in, left)
            return
        self.chunk_done(goal, turn, left)

    def receive_push(self, payload: dict[str, Any]) -> bool:
        """The push dispatcher's receiver: the goal's agent gets the resume
        packet and the lease the wake granted, and starts a turn with it
        seconds later (the product's task is still running: nothing here
        calls back into it)."""
        goal = self.goals.get(str(payload.get("goal_id", "")))
        lease = payload.get("lease") or {}
        if goal is None or goal.ended or not lease.get("token"):
            return True  # taken, and nothing to do (a notification, a goal it dropped)
        handed = Lease(str(lease["token"]), int(lease["generation"]))
        goal.handed.add(handed.generation)
        self.count("push_received")
        goal.turn += 1  # whatever it was waiting for is superseded by this wake
        goal.mode = "pushed"
        self.note(goal, f"the push dispatcher hands the agent generation {handed.generation} "
                        f"({str(payload.get('occurrence_id', ''))[:40]})")
        self.after(timedelta(seconds=self.rng.uniform(1, 30)), self.pushed_turn, goal,
                   goal.turn, handed, self.now)
        return True

    def pushed_turn(self, goal: GoalSim, turn: int, lease: Lease, received: datetime) -> None:
        if turn != goal.turn or goal.ended:
            return
        # Held up past half its lease (the database was down as it began):
        # the skill's cadence (renew at least every lease_seconds / 2) has the
        # agent renew first, not in its first chunk minutes later — the
        # product gives a holder RECONNECT_GRACE after an outage, not a whole
        # chunk more.
        late = self.now - received > timedelta(seconds=LEASE_SECONDS / 2)
        if late and self.call(goal, product.heartbeat, goal.goal_id, goal.agent,
                              lease) is None:
            if goal.turn == turn:
                self.end_turn(goal, "its pushed lease was refused")
            return
        self.begin_turn(goal, lease)

    def excuse(self, goal: GoalSim, paused_until: str, retry_after: str) -> None:
        """The world knows its own provider: the goal may wait for the reset it
        was told, but never longer than what the world injected says (the
        Retry-After it sent, else a week: the longest reset its texts name),
        and unlisted for at most PAUSE_UNTOLD."""
        if not paused_until:
            return
        cap = timedelta(seconds=int(retry_after)) if retry_after.isdigit() else timedelta(days=7)
        stated = datetime.fromisoformat(paused_until.replace("Z", "+00:00"))
        # A wait longer than PAUSE_UNTOLD is a person's to decide: the world
        # excuses that much of it unlisted, no more.
        goal.excused_until = min(stated, self.now + cap, self.now + PAUSE_UNTOLD)

    def auth_burst(self) -> bool:
        burst = self.config.auth_burst
        if burst is None:
            return False
        start = START + timedelta(hours=burst[0])
        return start <= self.now < start + timedelta(hours=burst[1])

    def churn(self, goal: GoalSim, turn: int) -> None:
        """Release the lease and take it again about every 50 s, never a
        checkpoint: each grant is activity, not progress."""
        if turn != goal.turn or goal.lease is None:
            return
        if not self.acting(goal, "churn"):
            self.work_chunk(goal, turn, 1)  # back to work: its next checkpoint moves
            return
        self.count("churn")
        if self.call(goal, product.release, goal.goal_id, goal.agent, goal.lease) is None \
                and goal.turn != turn:
            return
        try:
            answer = product.pull(goal.goal_id, goal.agent, self.token())
        except Refused as refused:
            self.note(goal, f"churn: lease refused ({refused.code})")
            self.end_turn(goal, "churn: the lease was refused")
            return
        if not answer.acquired or answer.lease is None:
            self.end_turn(goal, f"churn: no lease ({answer.next_required_action})")
            return
        goal.handed.add(answer.lease.generation)
        goal.lease = answer.lease
        self.after(timedelta(seconds=self.rng.uniform(40, 60)), self.churn, goal, turn)

    def loop_turn(self, goal: GoalSim, turn: int) -> None:
        """At each wake the same step and percent, recorded again, and the
        turn ends: the empty loop that burns quota and gets nowhere. The
        world knows it is no progress (its agent did nothing new)."""
        if turn != goal.turn or goal.lease is None:
            return
        if not self.acting(goal, "looper"):
            self.work_chunk(goal, turn, 1)
            return
        self.count("looped_checkpoint")

        def same_checkpoint(*args: Any, **kwargs: Any) -> Any:
            return product.checkpoint(*args, **kwargs)

        self.call(goal, same_checkpoint, goal.goal_id, goal.agent, goal.lease,
                  step="looking into it", pct=goal.progress, next_actions=["look again"],
                  release=True)
        if goal.turn == turn:
            self.end_turn(goal, "looper: the same checkpoint again")

    def dummy_job(self, goal: GoalSim, turn: int, job_id: str = "",
                  done_at: datetime | None = None) -> None:
        """Track a job, heartbeat, report it succeeded some 50 minutes later,
        track the next: jobs end, no checkpoint ever."""
        if turn != goal.turn or goal.lease is None:
            return
        if job_id and done_at is not None and self.now >= done_at:
            self.count("dummy_job_done")
            self.call(goal, product.update_job, goal.goal_id, goal.agent, goal.lease,
                      job_id=job_id, status="succeeded")
            if goal.turn != turn:
                return
            job_id = ""
        if not job_id:
            if not self.acting(goal, "dummy_jobs"):
                self.work_chunk(goal, turn, 1)
                return
            goal.jobs += 1
            job_id = f"job-{goal.jobs}"
            tracked = self.call(goal, product.track_job, goal.goal_id, goal.agent, goal.lease,
                                job_id=job_id, ref=f"dummy-{goal.jobs}", notify=False)
            if tracked is None and goal.turn != turn:
                return
            done_at = self.now + self.minutes(45, 55)
        else:
            self.call(goal, product.heartbeat, goal.goal_id, goal.agent, goal.lease)
            if goal.turn != turn:
                return
        self.after(timedelta(minutes=4), self.dummy_job, goal, turn, job_id, done_at)

    def hang(self, goal: GoalSim, turn: int, left: int) -> None:
        """The agent hangs (a stuck tool call, a dead model stream) while its
        client keeps renewing the lease: heartbeats, never a checkpoint."""
        low, high = self.config.hang_hours
        goal.hung_until = self.now + timedelta(hours=self.rng.uniform(low, high))
        goal.injected = "hung_holder"
        self.count("hung_holder")
        self.note(goal, f"agent hangs until {_clock(goal.hung_until)}; its client heartbeats")
        self.after(timedelta(minutes=4), self.hung_beat, goal, turn, left)

    def hung_beat(self, goal: GoalSim, turn: int, left: int) -> None:
        if turn != goal.turn or goal.lease is None:
            return
        if goal.hung_until is None:
            # The hang ended and the agent worked on, but that step met the
            # unreachable database and is retried: work on, do not beat. (A
            # beat here found no end and renewed the lease every 4 minutes
            # for 28 days: seed 2, 30 days, NO_PROGRESS listed 670 h, a
            # world fault — the product listed it.)
            self.work_chunk(goal, turn, left)
            return
        if goal.hung_until is not None and self.now >= goal.hung_until:
            goal.hung_until = None
            if self.rng.random() < 0.5:
                self.note(goal, "the hung agent comes back and works on")
                self.work_chunk(goal, turn, left)
                return
            goal.crashed.add(goal.lease.generation)
            self.count("hung_holder_dies")
            self.note(goal, f"the hung agent's process dies (generation {goal.lease.generation})")
            goal.turn += 1
            goal.lease = None
            goal.mode = "idle"
            goal.last_turn_end = self.now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            self.after(self.minutes(10, 40), self.agent_poll, goal, goal.turn)
            return
        self.call(goal, product.heartbeat, goal.goal_id, goal.agent, goal.lease)
        if goal.turn == turn:
            self.after(timedelta(minutes=4), self.hung_beat, goal, turn, left)

    def chunk_done(self, goal: GoalSim, turn: int, left: int) -> None:
        lease = goal.lease
        assert lease is not None
        last = left <= 1
        finishing = last and goal.turns_done + 1 >= goal.turns_needed
        pct = min(99, int(100 * (goal.turns_done + (0.5 if not last else 1)) / goal.turns_needed))
        pct = max(pct, goal.progress)
        release = last and not finishing
        # Some turns end asking for a wake a few minutes later
        # (bounded by the product to 60 s - one watchdog interval).
        wake_in = (self.rng.randint(60, min(600, goal.cadence * 60))
                   if release and self.rng.random() < self.config.requested_wake else None)
        if wake_in:
            self.count("requested_wake")
        ok = self.call(goal, product.checkpoint, goal.goal_id, goal.agent, lease,
                       step=f"turn {goal.turns_done + 1} chunk {left}", pct=pct,
                       next_actions=["continue"], release=release, wake_in=wake_in)
        if goal.turn != turn:
            return
        if ok is None and goal.mode == "idle":
            return
        goal.progress = pct
        if not last:
            self.after(self.minutes(2, 8), self.work_chunk, goal, turn, left - 1)
            return
        goal.turns_done += 1
        if finishing:
            self.finish(goal)
        else:
            self.end_turn(goal, "checkpoint with release_lease")

    def ci_wait(self, goal: GoalSim, turn: int, job_id: str, done_at: datetime,
                left: int) -> None:
        if turn != goal.turn or goal.lease is None:
            return
        if not goal.healthy and self.rng.random() < self.config.ci_crash / 4:
            # Dies while it waits: its lease lapses, its CI run is nobody's.
            goal.crashed.add(goal.lease.generation)
            self.count("crash_during_ci")
            self.note(goal, f"agent dies waiting on CI {job_id} (generation "
                            f"{goal.lease.generation})")
            goal.turn += 1
            goal.lease = None
            goal.mode = "idle"
            goal.last_turn_end = self.now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            self.after(self.minutes(10, 40), self.agent_poll, goal, goal.turn)
            return
        if self.now < done_at:
            self.call(goal, product.heartbeat, goal.goal_id, goal.agent, goal.lease)
            if goal.turn == turn:
                self.after(timedelta(minutes=4), self.ci_wait, goal, turn, job_id, done_at, left)
            return
        status = "succeeded" if self.rng.random() < 0.7 else "failed"
        self.count(f"ci_{status}")
        self.call(goal, product.update_job, goal.goal_id, goal.agent, goal.lease,
                  job_id=job_id, status=status)
        if goal.turn != turn:
            return
        goal.mode = "working"
        self.note(goal, f"CI {job_id} {status}")
        # Heartbeat now: the next chunk may start up to 8 min later (skill: at
        # least every lease_seconds / 2).
        self.call(goal, product.heartbeat, goal.goal_id, goal.agent, goal.lease)
        if goal.turn != turn:
            return
        if status == "failed":
            goal.turns_needed += 1  # the fix is more work
        self.chunk_done(goal, turn, left)

    def ci_reports(self, goal: GoalSim, job_id: str, token: str) -> None:
        """CI's last step: the job's status with its notify token (no lease)."""
        if goal.ended:
            return
        status = "succeeded" if self.rng.random() < 0.7 else "failed"
        self.count(f"ci_{status}")
        self.touched.add(goal.goal_id)
        try:
            product.notify_job(goal.goal_id, job_id, token, status)
        except Refused as refused:
            self.note(goal, f"CI's notify refused: {refused.code}")
            return
        self.note(goal, f"CI reports {job_id} {status} with its notify token")
        if status == "failed":
            goal.turns_needed += 1

    def finish(self, goal: GoalSim) -> None:
        lease = goal.lease
        assert lease is not None
        status = ("blocked" if not goal.healthy and self.rng.random() < self.config.agent_blocked
                  else "completed")
        state = self.call(goal, product.finish, goal.goal_id, goal.agent, lease, status)
        if state == "pending_native_cleanup" and goal.host is not None:
            goal.host.active = False  # the host deletes its task, then says so
            state = self.call(goal, product.host_receipt, goal.goal_id, goal.agent, lease,
                              status="cancelled")
        self.note(goal, f"finish {status} -> {state}")
        self.count(f"finish_{status}")
        goal.turn += 1
        goal.lease = None
        goal.mode = "idle" if status == "blocked" else "done"
        if state in ("completed",):
            self.goal_over(goal)
        else:
            self.after(self.minutes(5, 20), self.agent_poll, goal, goal.turn)

    def goal_over(self, goal: GoalSim) -> None:
        if goal.ended:
            return
        goal.ended = True
        goal.mode = "done"
        if goal.host is not None:
            goal.host.active = False
        self.after(self.minutes(5, 120), self.start_goal, goal.slot)

    def zombie_write(self, goal: GoalSim, lease: Lease) -> None:
        """A crashed turn comes back (a paused VM, a stuck process) and writes with
        its old lease: fencing must refuse it unless that lease is still the goal's."""
        before = product.load(goal.goal_id)
        current = before.lease.generation if before.lease else None
        self.touched.add(goal.goal_id)
        self.count("zombie_write")
        try:
            product.checkpoint(goal.goal_id, goal.agent, lease, step="zombie write",
                               pct=before.progress_pct, next_actions=["?"])
        except Refused as refused:
            self.note(goal, f"zombie write with generation {lease.generation} refused "
                            f"({refused.code})")
            return
        if current != lease.generation:
            self.violation(inv.FENCING, goal.goal_id,
                           f"a write with stale generation {lease.generation} was accepted "
                           f"(current {current})")
            return
        # Its lease is still the goal's: the agent was not dead after all.
        goal.crashed.discard(lease.generation)
        self.note(goal, f"zombie with generation {lease.generation} was still the holder; "
                        "it carries on")
        if goal.mode == "idle":
            self.begin_turn(goal, lease)
            self.call(goal, product.heartbeat, goal.goal_id, goal.agent, lease)

    def agent_poll(self, goal: GoalSim, turn: int) -> None:
        """The agent comes back on its own and looks at its goal (skill: pull a due wake).
        An agent that runs only when its host fires (a ChatGPT or OpenClaw task
        agent) never does: between host fires it does not exist."""
        if turn != goal.turn or goal.mode != "idle" or goal.ended or goal.host_only:
            return
        state = product.load(goal.goal_id)
        if state.terminal:
            self.note(goal, f"agent sees the goal {state.status} ({state.reason})")
            self.goal_over(goal)
            return
        if state.status == "blocked":
            self.after(self.minutes(30, 60), self.agent_poll, goal, goal.turn)
            return
        if goal.scheduler == "host" and product.attention(state) == "HOST_SILENT":
            self.host_recreates(goal)
            return
        if product.wake_waiting(state, goal.last_turn_end) and (
                goal.scheduler == "internal" or product.is_ready(state)):
            self.pull(goal, goal.turn)
            return
        # Nothing for it yet: come back later, less often the longer nothing
        # happens, but at least once a slot: a ready wake nobody pulls counts as
        # a wake without progress, and max_wake_retries of them block.
        goal.idle_polls += 1
        back = min(float(goal.cadence), 120.0, 5.0 * 2 ** min(goal.idle_polls, 5))
        self.after(self.minutes(back / 3, back), self.agent_poll, goal, goal.turn)

    def pull(self, goal: GoalSim, turn: int) -> None:
        if turn != goal.turn or goal.mode != "idle":
            return
        token = self.token()
        self.touched.add(goal.goal_id)
        try:
            answer = product.pull(goal.goal_id, goal.agent, token)
        except Refused as refused:
            self.note(goal, f"pull refused: {refused.code}")
            self.after(self.minutes(15, 45), self.agent_poll, goal, goal.turn)
            return
        if answer.acquired and answer.lease is not None:
            goal.handed.add(answer.lease.generation)
            self.note(goal, f"agent pulls the wake: lease generation {answer.lease.generation}")
            self.begin_turn(goal, answer.lease)
            return
        wait = answer.retry_after_seconds or 600
        self.note(goal, f"pull answered acquired=false {answer.next_required_action} "
                        f"retry_after={answer.retry_after_seconds}")
        if answer.next_required_action in ("operator_recover", "start_a_new_goal"):
            self.after(self.minutes(30, 60), self.agent_poll, goal, goal.turn)
            return
        self.after(timedelta(seconds=wait) + self.minutes(0, 3), self.pull, goal, goal.turn)

    # -------------------------------------------------------------- hosts

    def host_slot(self, goal: GoalSim, host: HostSchedule, k: int) -> None:
        """Slot k of a host schedule: fire late, up to 30 s early, twice, or not at all."""
        if not host.active or goal.host is not host:
            return
        slot_at = host.anchor + k * host.interval
        self.at(slot_at + host.interval, self.host_slot, goal, host, k + 1)
        roll = self.rng.random()
        if roll < 0.05:
            self.count("host_missed_slot")
            goal.host_delay += host.interval
            host.last_missed = slot_at
            self.note(goal, f"host misses slot {k}")
            return
        early = roll < 0.05 + self.config.host_early
        offset = -self.rng.uniform(0, 30) if early else self.rng.uniform(0, 300)
        occurrence = f"{host.ref}-run-{k}" if host.passes_ids else None
        first = slot_at + timedelta(seconds=offset)
        self.at(max(first, self.now), self.host_fire, goal, host, occurrence, k, False,
                slot_at)
        if early:
            self.count("host_early_fire")
        if self.rng.random() < self.config.host_double:
            self.count("host_double_fire")
            again = first + self.minutes(0.1, 10)
            self.at(max(again, self.now), self.host_fire, goal, host, occurrence, k, True,
                    slot_at)

    def host_fire(self, goal: GoalSim, host: HostSchedule, occurrence: str | None, k: int,
                  duplicate: bool, slot_at: datetime, retries: int = 0) -> None:
        if not host.active:
            return
        token = self.token()
        self.touched.add(goal.goal_id)
        before = product.load(goal.goal_id)
        try:
            answer = product.host_claim(goal.goal_id, goal.agent, token, occurrence)
        except Refused as refused:
            self.note(goal, f"host claim for slot {k} refused: {refused.code}")
            if not duplicate:
                host.last_missed = slot_at  # the product never heard this slot
            return
        late = (self.now - slot_at).total_seconds()
        if (answer.outcome == "not_due" and not duplicate and not retries
                and not goal.wrong_anchor
                and before.status != "paused" and -30 <= late < host.interval.total_seconds() / 2):
            self.violation(inv.NO_DRIFT, goal.goal_id,
                           f"the host's slot {k} ({slot_at:%H:%M:%S}) fired {late:.0f} s from "
                           f"its time and was answered not_due; next due was "
                           f"{before.watchdog.next_due_at if before.watchdog else None}")
        self.report.claims[answer.outcome] = self.report.claims.get(answer.outcome, 0) + 1
        self.note(goal, f"host fires slot {k}{' again' if duplicate else ''} "
                        f"(occurrence {occurrence or 'none'}) -> {answer.outcome}")
        # The slot this fire stands for: the host's own run when it names it;
        # without an id, the nearest slot (docs/design.md, "Wake timing and
        # occurrences": a fire up to half an interval early belongs to the
        # coming slot, a later one to the slot it was meant for).
        slot = k if occurrence else round((self.now - host.anchor) / host.interval)
        self.record_slot_grant(goal, f"host:{host.ref}:{slot}", answer.outcome)
        self.count("host_claim")
        if answer.outcome == "recurring_acquired" and answer.lease is not None:
            goal.handed.add(answer.lease.generation)
            goal.turn += 1  # whatever the agent still thought it held is gone
            self.begin_turn(goal, answer.lease)
        elif answer.outcome == "worker_busy_noop" and (answer.retry_after_seconds or 999) <= 60 \
                and retries < 3:
            # Skill: only the stale grace remains; wait that long, claim again.
            self.after(timedelta(seconds=answer.retry_after_seconds or 1), self.host_fire,
                       goal, host, occurrence, k, duplicate, slot_at, retries + 1)
        elif answer.outcome == "terminal_cleanup_required":
            host.active = False  # delete the host task, then record it
            state = product.load(goal.goal_id)
            try:
                product.host_receipt(goal.goal_id, goal.agent, goal.lease,
                                     status="cancelled")
                self.note(goal, "host deleted its task and recorded the cancellation")
            except Refused as refused:
                self.note(goal, f"host deleted its task; the receipt was refused "
                                f"({refused.code}, goal {state.status})")
        elif answer.outcome == "terminal_noop" and before.terminal:
            # The skill: on terminal_noop "stop and change nothing". A blocked
            # goal keeps its host watchdog (an operator may recover it,
            # and its host fires it again); only an ended goal's host, whose
            # watchdog is no longer live, stops firing. Deleting the task for
            # a blocked goal made every recovered host goal HOST_SILENT.
            host.active = False

    def record_slot_grant(self, goal: GoalSim, slot: str, outcome: str) -> None:
        if outcome != "recurring_acquired":
            return
        seen = getattr(goal, "_slots", set())
        if slot in seen:
            self.violation(inv.EXACTLY_ONCE, goal.goal_id,
                           f"the slot {slot} was granted twice (two occurrence ids for one "
                           "scheduled slot)")
        seen.add(slot)
        goal._slots = seen  # type: ignore[attr-defined]

    # -------------------------------------------------------------- django-q2

    def in_outage(self, moment: datetime) -> datetime | None:
        return _outage_end(self.outages, moment)

    def _outages(self) -> list[tuple[datetime, datetime]]:
        # Its own stream, so the outage plan does not depend on what else happened.
        rng = random.Random(self.config.seed * 7919 + 1)  # noqa: S311
        outages, day = [], 0
        while day < self.config.days:
            if rng.random() < self.config.outages_per_day:
                start = START + timedelta(days=day, hours=rng.uniform(0, 24))
                outages.append((start, start + timedelta(hours=rng.uniform(1, 6))))
            day += 1
        if self.config.long_outage and self.config.days >= 7:
            # A cluster down for days (a weekend nobody looked).
            start = START + timedelta(days=rng.uniform(1, self.config.days - 4))
            outages.append((start, start + timedelta(days=rng.uniform(1, 3))))
            outages.sort()
        return outages

    def scheduler_tick(self) -> None:
        """django-q2's own scheduler pass (django_q/scheduler.py), every 30 s
        but during outages: due rows become tasks in the ORM broker's queue. A
        cluster's worker takes them after a delay (queue, busy workers)."""
        self.at(self.now + timedelta(seconds=30), self.scheduler_tick)
        if self.in_outage(self.now) or not product.anything_due():
            return  # (a pass with nothing due does nothing: skipped, it costs a query)
        if not product.run_scheduler():
            return
        self._schedules = None
        roll = self.rng.random()
        delay = (self.rng.uniform(1, 30) if roll < 0.6 else
                 self.rng.uniform(30, 120) if roll < 0.85 else self.rng.uniform(120, 600))
        self.at(self.now + timedelta(seconds=delay), self.worker_takes)

    def worker_takes(self) -> None:
        """A worker takes every queued task and runs it with django-q2's own worker."""
        end = self.in_outage(self.now)
        if end is not None:
            self.at(end + timedelta(seconds=self.rng.uniform(1, 60)), self.worker_takes)
            return
        for task in product.take_tasks():
            self.run_task(task, duplicate=False)
        if product.tasks_in_flight():
            # A failed task the cluster does not acknowledge is handed out
            # again after its `retry` seconds (ack_failures off).
            self.after(timedelta(seconds=product.cluster_retry_seconds() + 1), self.worker_takes)

    def run_task(self, task: dict[str, Any], duplicate: bool) -> None:
        if task["func"] != product.FIRE:
            # The lease sweeper, the hourly schedule repair, the prune, the
            # seal: their own django-q2 rows, as `migrate` created them. Only
            # the first two change goals (they answer how many).
            ran = product.run_task(task)
            if ran.success and task["func"] == product.SWEEP:
                if self.last_sweep is not None and \
                        self.now - self.last_sweep > product.SWEEP_SILENCE:
                    self.sweep_silences.append((self.last_sweep, self.now))
                self.last_sweep = self.now
                if self.swept_after_step is None and self.set_back_at is not None:
                    self.swept_after_step = self.now
            if not ran.success:
                self.report.task_failures += 1
            elif ran.result and task["func"] in product.GOAL_CHANGING_TASKS:
                self._schedules = None
                self.touched.update(self.active())
            return
        self.fire(task, duplicate)
        if duplicate:
            return
        roll = self.rng.random()
        if roll < 0.06:
            self.count("duplicate_fire")
        if roll < 0.04:  # a second cluster ran the same task
            self.after(timedelta(seconds=self.rng.uniform(0, 20)), self.run_task, task, True)
        elif roll < 0.06:  # the task ran past its timeout and was handed to another worker
            self.after(timedelta(seconds=120), self.run_task, task, True)

    def fire(self, task: dict[str, Any], duplicate: bool) -> None:
        args, kwargs = task["args"], task["kwargs"]
        intended = kwargs["intended_date"]
        goal_id = str(args[0]) if args else ""
        goal = self.goals.get(goal_id)
        before = product.load(goal_id) if goal else None
        ran = product.run_task(task)
        if not ran.success:
            # Recorded by django-q2 as a failed task; the world goes on.
            self.report.task_failures += 1
            self.count("wake_task_failed")
            if goal is not None:
                self.note(goal, f"django-q2's wake task failed: {str(ran.result)[:60]}")
            return
        outcome = ran.result
        if datetime.fromisoformat(intended) < self.now - timedelta(minutes=15):
            self.count("fire_after_outage")  # django-q2 was down or busy when it was due
        self.report.fires += 1
        self.report.claims[outcome] = self.report.claims.get(outcome, 0) + 1
        if goal is None or before is None:
            return
        self.touched.add(goal_id)
        intended_at = datetime.fromisoformat(intended)
        delay = (self.now - intended_at).total_seconds()
        paused = bool(before.paused_until) and before.status == "paused"
        kind = str(kwargs.get("kind", "watchdog"))
        self.fires.append(Fire(goal_id, kind, intended_at, self.now, outcome, duplicate, paused))
        self.note(goal, f"django-q2 fires {kind} intended {intended_at:%H:%M:%S} "
                        f"(+{delay:.0f} s{', duplicate' if duplicate else ''}) -> {outcome}")
        if outcome == "recurring_acquired":
            self.record_slot_grant(goal, f"internal:{intended}", outcome)
        # No drift: an on-time fire (picked up within half an interval) of a goal
        # that is not paused is never not_due.
        if (outcome == "not_due" and kind == "watchdog" and not duplicate and not paused
                and delay < goal.interval.total_seconds() / 2):
            self.violation(inv.NO_DRIFT, goal_id,
                           f"the watchdog slot intended {intended_at:%H:%M:%S} fired "
                           f"{delay:.0f} s late (under half the {goal.cadence}-min interval) "
                           f"and was answered not_due; next due was "
                           f"{before.watchdog.next_due_at if before.watchdog else None}")

    # -------------------------------------------------------------- operators

    def operator_tick(self) -> None:
        """Operators look at /alerts (the dashboard) and act after a while."""
        self.after(timedelta(minutes=20), self.operator_tick)
        # Every page of the real /alerts, with an operator's bearer token; the
        # web answers even while the scheduler is down.
        listed = self.read_alerts().reasons
        for goal_id, state in product.load_many(self.active()).items():
            goal = self.goals[goal_id]
            reason = listed.get(goal_id, "")
            if reason == "OVERDUE":
                # Past its deadline with nothing recorded (the scheduler was
                # down): after a few hours an operator wakes it, or stops it.
                goal.overdue_since = goal.overdue_since or self.now
                if self.now - goal.overdue_since > timedelta(hours=3):
                    goal.overdue_since = None
                    self.operator_unstick(goal)
                continue
            goal.overdue_since = None
            if reason:
                key = (reason, state.version)
                if key in goal.blocked_seen:
                    continue
                goal.blocked_seen.add(key)
                # Not every listing is acted on within hours: some wait days.
                delay = (self.minutes(6 * 60, 4 * 24 * 60)
                         if self.rng.random() < self.config.slow_operator
                         else self.minutes(10, 6 * 60))
                self.after(delay, self.operator_act, goal, state.version, reason)
            elif (state.status == "paused" and state.paused_until and
                  state.paused_until - self.now > timedelta(hours=6)
                  and ("pause", state.version) not in goal.blocked_seen):
                goal.blocked_seen.add(("pause", state.version))
                if self.rng.random() < self.config.wake_long_pauses:
                    self.after(self.minutes(5, 60), self.operator_wake, goal)

    def damage_tick(self) -> None:
        """Someone deletes or exhausts a goal's watchdog row by hand (an admin
        page, a restore, SQL): the ledger must notice and repair it itself."""
        self.after(timedelta(days=1) / max(self.config.row_damage_per_day, 0.01)
                   * self.rng.uniform(0.5, 1.5), self.damage_tick)
        internal = [g for g in self.active() if self.goals[g].scheduler == "internal"]
        if not internal:
            return
        goal = self.goals[self.rng.choice(internal)]
        how = "delete" if self.rng.random() < 0.5 else "exhaust"
        if product.damage_row(goal.goal_id, how):
            self._schedules = None
            self.count(f"row_{how}d" if how == "delete" else "row_exhausted")
            self.note(goal, f"an operator {how}s the goal's watchdog row by hand")
            goal.damaged_at = self.now

    def delete_sweeper_row(self) -> None:
        """An admin deletes the lease sweeper's own django-q2 row: only the
        hourly schedule repair restores it."""
        if product.delete_sweeper_row():
            self.count("sweeper_row_deleted")

    # ---------------------------------------------------------- a stepped clock

    def clock_jumps(self) -> None:
        """The server's clock jumps hours ahead (a bad NTP answer, a hand-set
        clock), runs there a few minutes while agents and django-q2 go on,
        and is set back. From then on the notification watch (the Procfile's
        `watch`, a process other than the scheduler) runs every minute."""
        _share, hours, minutes = self.config.clock_step or (0.0, 0.0, 0.0)
        self.clock.offset = timedelta(hours=hours)
        self.count("clock_step")
        self.after(timedelta(minutes=minutes), self.clock_set_back)

    def clock_set_back(self) -> None:
        """The clock is right again. Every agent that held a lease while it was
        ahead dies now, silently: its lease and progress clock were stamped in
        the future, and only the product can bring them back within its policy."""
        self.clock.offset = timedelta()
        self.set_back_at = self.now
        for goal_id in self.active():
            goal = self.goals[goal_id]
            if goal.lease is None:
                continue
            goal.crashed.add(goal.lease.generation)
            goal.healthy = False  # the world broke it: PROGRESS no longer applies
            goal.injected = "clock_step"
            self.count("clock_step_holder_died")
            self.note(goal, f"its holder (generation {goal.lease.generation}) dies as the "
                            "clock is set back")
            goal.turn += 1
            goal.lease = None
            goal.mode = "idle"
            self.after(self.minutes(10, 40), self.agent_poll, goal, goal.turn)
        self.after(timedelta(minutes=1), self.notify_watch)

    def notify_watch(self) -> None:
        self.after(timedelta(minutes=1), self.notify_watch)
        if product.notify_watch() == "silent":
            self._schedules = None  # it may have restored the scheduler's rows

    def operator_act(self, goal: GoalSim, version: int, reason: str = "") -> None:
        state = product.load(goal.goal_id)
        if state.version != version or goal.ended:
            return  # something happened meanwhile; the next look decides again
        self.touched.add(goal.goal_id)
        if reason == "HOST_SILENT" and goal.host_only:
            # The agent never runs unless its host fires: the human reads the
            # alert and asks the agent (in its chat) to re-create the task.
            self.count("operator_recreates_host_task")
            self.note(goal, "an operator reads HOST_SILENT and has the agent re-create its task")
            self.host_recreates(goal)
            return
        operator = f"operator-{self.rng.randint(1, 3)}"
        roll = self.rng.random()
        try:
            if state.reason == "BLOCKED_APPROVAL":
                gate = state.pending_approvals[0]["gate"]
                decision = "approve" if roll < 0.85 else "reject"
                product.resolve_approval(goal.goal_id, operator, gate, decision)
                self.count(f"operator_{decision}")
                self.note(goal, f"{operator} {decision}s {gate}")
            elif state.status == "failed" and roll > 0.6:
                self.note(goal, f"{operator} leaves the {state.reason} goal failed")
                self.goal_over(goal)
            elif roll < 0.85 or state.status == "failed":
                self.count("operator_recover")
                product.recover(goal.goal_id, operator, "looked at it; carry on")
                self.note(goal, f"{operator} recovers the goal from {reason or state.reason}")
                if reason == "LONG_PAUSE" and state.paused_until:
                    # The person chose to wait for the reset: the world's own
                    # decision, excused as long as the product lets it go untold.
                    self.excuse(goal, iso(state.paused_until), "")
            else:
                product.stop(goal.goal_id, operator, "not worth it")
                self.count("operator_stop")
                self.note(goal, f"{operator} stops the goal")
        except Refused as refused:
            self.note(goal, f"{operator}'s act refused: {refused.code}: {refused.detail[:80]}")
            from ledger.domain import lease_refusal

            told = (lease_refusal(state, self.now) or {}).get("next_required_action")
            if refused.code == "not_recoverable" and told == "operator_recover":
                self.violation(inv.OPERATOR_CAN_RECOVER, goal.goal_id,
                               f"the API tells the agent to ask for operator_recover on a "
                               f"{state.status}/{state.reason} goal, and recover refuses it")
            product.stop(goal.goal_id, operator, "could not recover it")
            self.note(goal, f"{operator} stops the goal instead")
        after = product.load(goal.goal_id)
        if after.terminal:
            self.goal_over(goal)
        elif goal.mode == "idle":
            self.after(self.minutes(1, 10), self.agent_poll, goal, goal.turn)

    def operator_unstick(self, goal: GoalSim) -> None:
        self.touched.add(goal.goal_id)
        self.count("operator_unstick")
        try:
            product.wake_now(goal.goal_id, "operator-2", "stuck: nothing would wake it")
            self.note(goal, "operator-2 wakes the stuck goal")
            return
        except Unsupported:
            pass
        except Refused as refused:
            self.note(goal, f"operator wake refused: {refused.code}")
        try:
            product.stop(goal.goal_id, "operator-2", "stuck: nothing would wake it")
        except Refused as refused:
            self.note(goal, f"operator stop refused: {refused.code}")
            return
        self.note(goal, "operator-2 stops the stuck goal (no way to wake it)")
        self.goal_over(goal)

    def operator_wake(self, goal: GoalSim) -> None:
        self.count("operator_wake")
        try:
            product.wake_now(goal.goal_id, "operator-1", "the reset already passed")
        except Unsupported:
            return
        except Refused as refused:
            self.note(goal, f"operator wake refused: {refused.code}")
            return
        self.touched.add(goal.goal_id)
        self.note(goal, "operator-1 wakes the goal now")

    # -------------------------------------------------------------- invariants

    def violation(self, name: str, goal_id: str, message: str) -> None:
        if (name, goal_id) in self.violated:
            return
        self.violated.add((name, goal_id))
        self.report.violations.append(inv.Violation(name, goal_id, self.now, message,
                                                    self.trace(goal_id)))

    def check_goal(self, goal_id: str, schedules: list[Any] | None = None,
                   state: Any = None) -> None:
        goal = self.goals.get(goal_id)
        if goal is None or goal.monitor is None:
            return
        self.report.checks += 1
        state = state or product.load(goal_id)
        news = product.events(goal_id, after=goal.monitor.seen) \
            if state.version > goal.monitor.seen else []
        # The schedules change with some events, and with the one-off wakes and
        # watchdog a command uses up or drops: re-read them when either moved.
        schedule_facts = (str(state.reset_wake), str(getattr(state, "requested_wake", None)),
                          state.watchdog_status, state.status)
        if schedule_facts != goal.schedule_facts:
            goal.schedule_facts = schedule_facts
            self._schedules = None
        for event in news:
            if event["kind"] in product.SCHEDULE_KINDS:
                self._schedules = None
            for name, message in goal.monitor.feed(event):
                self.violation(name, goal_id, message)
            if event["kind"] in ("lease.acquired", "lease.taken_over"):
                generation = event["data"]["generation"]
                if generation not in goal.handed and goal.push \
                        and event["data"].get("via") == "wake":
                    # The outbox sends it from the wake task, or (an operator's
                    # wake) from the sweeper's next pass: checked in minutes.
                    goal.undelivered[generation] = self.now
                elif generation not in goal.handed:
                    self.violation(inv.PULL_WAKES, goal_id,
                                   f"lease generation {generation} granted "
                                   f"via {event['data'].get('via')} to no one who got its "
                                   "token (dispatcher none: the agent must pull)")
            if event["kind"] == "goal.blocked" and \
                    event["data"].get("reason") == "INTERRUPTED_UNKNOWN":
                generation = goal.monitor.interrupted[-1]
                if generation not in goal.crashed:
                    who = "a live agent" if generation in goal.handed else "no one"
                    self.violation(inv.INTERRUPTED_ONLY_AFTER_SILENCE, goal_id,
                                   f"INTERRUPTED_UNKNOWN for generation {generation}, held by "
                                   f"{who}: nothing went silent")
            # An operator who stops a listed goal ("not worth it") decides for
            # it: no product fault (seed 4, 30 days: a host drop during a
            # scheduler outage, HOST_SILENT recorded when the sweeper came back,
            # and an operator stopped the healthy goal from /alerts).
            stopped_by_operator = event["kind"] == "goal.stopped" and \
                str(event["actor"]).startswith("operator")
            # A host that dropped the goal's task (injected), not re-created
            # yet: nothing runs its agent, so a wake made ready for pull (an
            # operator's, during an outage that hid HOST_SILENT) goes
            # unclaimed, and the block asks a human, listed — the product's
            # answer, no fault (seed 2, 30 days).
            host_gone = event["kind"] == "goal.blocked" and goal.host is not None \
                and not goal.host.active \
                and event["data"].get("reason") in ("READY_UNCLAIMED", "HOST_SILENT")
            judged_ahead = event["kind"] == "goal.blocked" and self.clock.offset \
                and event["data"].get("reason") == "READY_UNCLAIMED"
            if judged_ahead and goal.healthy:
                goal.blocked_ahead = self.now
                self.count("ready_unclaimed_judged_ahead")
            elif event["kind"] in ("goal.completed", "goal.failed", "goal.blocked",
                                   "goal.stopped") and goal.healthy and not stopped_by_operator \
                    and not host_gone:
                if event["kind"] != "goal.completed":
                    self.violation(inv.PROGRESS, goal_id,
                                   f"a goal whose agent always succeeds ended "
                                   f"{event['kind']} ({event['data'].get('reason', '')}) "
                                   f"after {goal.turns_done}/{goal.turns_needed} turns")
                elif goal.monitor.granted_wakes > goal.turns_needed:
                    self.violation(inv.PROGRESS, goal_id,
                                   f"done after {goal.monitor.granted_wakes} wakes for "
                                   f"{goal.turns_needed} turns of work")
        if goal.blocked_ahead is not None:
            if state.status != "blocked" or state.reason != "READY_UNCLAIMED":
                goal.blocked_ahead = None  # withdrawn once the clock was set back
            elif self.swept_after_step is not None \
                    and self.now - self.swept_after_step > timedelta(minutes=30):
                self.violation(inv.PROGRESS, goal_id,
                               "a goal whose agent always succeeds stayed goal.blocked "
                               "(READY_UNCLAIMED), judged while the clock ran ahead, after "
                               "the clock was set back")
        if schedules is None:
            schedules = self.schedules(goal_id)
        if not state.terminal and product.deadline(state) is None \
                and not product.attention(state):
            self.violation(inv.LIVENESS, goal_id,
                           f"{state.status} goal expects no evidence by any deadline and "
                           f"names no reason for a human (watchdog "
                           f"{state.watchdog_status or 'none'})")
        self.doctor(goal, state, schedules)

    def doctor(self, goal: GoalSim, state: Any, schedules: list[Any]) -> None:
        """The cheap consistency checks `ledger doctor` is to make."""
        names = {s.name for s in schedules}
        watchdog = state.watchdog.stored() if state.watchdog is not None else {}
        if watchdog.get("backend") == "internal":
            # A terminal goal's live watchdog is cleaned up by its next wake
            # (terminal_cleanup_required): consistent while its row exists.
            live = watchdog.get("status") in inv.WATCHDOG_LIVE
            has_row = watchdog.get("schedule_name") in names
            # A row deleted by hand matters once the goal waits for it
            # (scheduled): the sweeper must have repaired it within minutes.
            waits = live and not has_row and product.label(state) in ("scheduled", "overdue")
            goal.row_missing_since = (goal.row_missing_since or self.now) if waits else None
            due = max(product.deadline(state) or self.now, goal.row_missing_since or self.now)
            repairable = waits and self.now > due + timedelta(minutes=3) \
                and not self.recently_down(due)
            if live and not has_row and (goal.damaged_at is None or repairable):
                self.violation(inv.DOCTOR, goal.goal_id, "the projection's internal watchdog "
                               "is live with no django-q2 schedule behind it"
                               + (" (deleted by hand, never repaired)" if goal.damaged_at
                                  else ""))
            if has_row and not live:
                self.violation(inv.DOCTOR, goal.goal_id, f"a django-q2 watchdog schedule "
                               f"remains for a {state.status} goal whose watchdog is "
                               f"{watchdog.get('status')}")
        stale = product.stale_at(state)
        # After an outage the product gives a lease that went stale in it
        # RECONNECT_GRACE from the first sweep back (its holder's heartbeats
        # may have been refused): swept by then, not 3 minutes after.
        if (stale is not None and self.now > stale + timedelta(minutes=3)
                and not self.recently_down(self.now, product.RECONNECT_GRACE)
                and not self.excused_by_silence(stale)):
            self.violation(inv.SWEPT, goal.goal_id, f"a lease stale since {stale:%H:%M:%S} "
                                                    "was not swept")

    def excused_by_silence(self, stale: datetime) -> bool:
        """The lease went stale while the sweeper was silent (its worker busy,
        the database down): the product gives it RECONNECT_GRACE after the first
        sweep back, so it is swept by then (and 3 minutes)."""
        return any(start < stale and self.now < end + product.RECONNECT_GRACE
                   + timedelta(minutes=3) for start, end in self.sweep_silences[-20:])

    def recently_down(self, moment: datetime, grace: timedelta = timedelta(0)) -> bool:
        """The scheduler (or the database it needs) was down at ``moment`` or came
        back less than 3 min (and ``grace``) before."""
        return any(s <= moment < e + timedelta(minutes=3) + grace
                   for s, e in self.outages + self.db_outages)

    def read_alerts(self) -> product.AlertsRead:
        if self.reader is None:
            self.reader = product.Api("sim-dashboard", "operator")
        read = product.read_alerts(self.reader)
        self.report.most_listed = max(self.report.most_listed, len(read.reasons))
        self.report.alerts_pages = max(self.report.alerts_pages, read.pages)
        if read.count is not None and read.count != read.rows:
            self.report.alerts_count_mismatch += 1
        return read

    def bound(self, goal: GoalSim) -> timedelta:
        """The world's own bound on unlisted time without progress, from the
        policy it gave the goal (README): a cadence, plus the longest of the
        waits the product may take before it must list the goal (a lease and
        its stale grace, a ready wake's timeout, the progress bound, a host's
        silent slots), plus a margin."""
        # A host goal: the silence before HOST_SILENT (its slots and half a slot
        # of lateness), then the re-created task's first slot. A listing that
        # short falls between two samples of /alerts: it cannot reset the bound.
        host = ((HOST_SILENT_SLOTS + 1.5) * goal.interval if goal.scheduler == "host"
                else timedelta())
        return goal.interval + max(timedelta(seconds=LEASE_SECONDS) + STALE_GRACE,
                                   timedelta(minutes=READY_TIMEOUT_MINUTES), PROGRESS_BOUND,
                                   host) + MARGIN

    def evidence_check(self, states: dict[str, Any]) -> None:
        """Liveness judged from outside, with every page of the real
        /alerts. The headline: a goal unlisted with no progress its agent saw
        succeed for longer than the world's bound (since its last progress,
        its last listing, or the end of a wait the world knows it caused).
        Also the narrower invariant of docs/design.md ("Liveness: no goal is
        ever silently stuck") with the product's own deadline, the listed hours
        by reason and the longest listing."""
        listed = self.read_alerts().reasons
        hours = CHECK_EVERY.total_seconds() / 3600
        slack = timedelta(minutes=5)
        for goal_id, state in sorted(states.items()):
            goal = self.goals.get(goal_id)
            if state.terminal:
                if goal is not None:
                    goal.listing = None
                continue
            self.report.active_hours += hours
            if product.label(state) == "working":
                self.report.working_hours += hours
            reason = listed.get(goal_id)
            if reason:
                self.report.visible_stuck[reason] = \
                    self.report.visible_stuck.get(reason, 0.0) + hours
                if reason == "HOST_SILENT" and goal is not None and goal.host is not None \
                        and goal.host.healthy(self.now):
                    healthy = self.report.host_silent_healthy
                    healthy[goal_id] = healthy.get(goal_id, 0.0) + hours
                    self.note(goal, "listed HOST_SILENT while its host is healthy")
                if goal is not None:
                    goal.last_listed = self.now
                    goal.listed_for += CHECK_EVERY
                    goal.listing = goal.listing or (reason, self.now)
                    length = (self.now - goal.listing[1]).total_seconds() / 3600
                    if length > self.report.longest_listing[0]:
                        self.report.longest_listing = (length, goal.listing[0], goal_id)
                continue
            if goal is not None:
                goal.listing = None
                self.unseen_check(goal, state)
            deadline = product.deadline(state)
            if deadline is not None and self.now > deadline + slack:
                self.report.invisible_stuck_hours += hours
                self.violation(inv.LIVENESS, goal_id,
                               f"{state.status} goal past its deadline {deadline:%H:%M:%S} "
                               f"({product.label(state)}) and not listed in /alerts")

    def unseen_check(self, goal: GoalSim, state: Any) -> None:
        since = max(t for t in (goal.started_at, goal.last_progress, goal.last_listed,
                                goal.excused_until) if t is not None)
        over = self.now - (since + self.bound(goal))
        if over <= timedelta():
            return
        hours = min(over, CHECK_EVERY).total_seconds() / 3600
        self.report.unseen_hours += hours
        cause = goal.injected or (f"wrong_due_at:{goal.wrong_anchor}" if goal.wrong_anchor
                                  else "poisoned_wake" if goal.poisoned
                                  else "host_only" if goal.host_only else "none")
        self.report.unseen_causes[cause] = self.report.unseen_causes.get(cause, 0.0) + hours
        self.report.unseen_goals.add(goal.goal_id)
        self.violation(inv.UNSEEN, goal.goal_id,
                       f"{state.status} goal ({product.label(state)}) unlisted in /alerts with "
                       f"no progress since {_clock(since)}, past the world's bound of "
                       f"{self.bound(goal)} (the world injected: {cause})")

    def push_check(self) -> None:
        """A pushed wake's lease reaches its agent within minutes (the sweeper
        sends what the wake task did not), unless django-q2 was down meanwhile."""
        if "sweeper_off" in self.config.planted:
            return
        for goal in self.goals.values():
            for generation, granted in sorted(goal.undelivered.items()):
                if generation in goal.handed:
                    del goal.undelivered[generation]
                elif self.now - granted > timedelta(minutes=5) and not any(
                        s <= self.now and e + timedelta(minutes=3) >= granted
                        for s, e in self.outages + self.db_outages):
                    del goal.undelivered[generation]
                    self.violation(inv.PULL_WAKES, goal.goal_id,
                                   f"lease generation {generation}, granted by a wake at "
                                   f"{_clock(granted)} for the push dispatcher, never reached "
                                   "the agent")

    def periodic_check(self) -> None:
        self.after(CHECK_EVERY, self.periodic_check)
        self.push_check()
        states = product.load_many(self.active())
        self.evidence_check(states)
        by_goal: dict[str, list[Any]] = {}
        self._schedules = None  # a safety net: re-read them every half hour
        for row in self.schedules():
            by_goal.setdefault(row.goal_id, []).append(row)
        for goal_id, state in sorted(states.items()):
            self.check_goal(goal_id, by_goal.get(goal_id, []), state)
        if (self.now - START) % REPLAY_EVERY < CHECK_EVERY:
            self.replay_check()

    def replay_check(self) -> None:
        """Replay and verify every goal that changed since its last replay."""
        ids = sorted(goal_id for goal_id, goal in self.goals.items() if goal.monitor
                     and self.replayed.get(goal_id) != goal.monitor.seen)
        for goal_id in ids:
            self.replayed[goal_id] = self.goals[goal_id].monitor.seen  # type: ignore[union-attr]
        if not ids:
            return
        self.report.checks += len(ids)
        for goal_id, fields in product.replay_differences(ids).items():
            self.violation(inv.REPLAY, goal_id, f"replay differs from the projection in "
                                                f"{', '.join(fields[:6])}")
        for goal_id, broken in product.broken_chains(ids).items():
            self.violation(inv.CHAIN, goal_id, f"the hash chain is broken: {broken}")

    def final_check(self) -> None:
        self.periodic_check()
        for goal_id in self.active():
            self.check_goal(goal_id)
        self.replay_check()
        if self.report.host_silent_healthy:
            healthy = self.report.host_silent_healthy
            worst = max(healthy, key=healthy.__getitem__)
            self.report.host_silent_trace = self.trace(worst)
        drift = product.tally_drift()
        if drift:  # one violation, every tally named (they are not a goal's)
            self.violation(inv.TALLIES, "", "the goal tallies disagree with a count: " +
                           "; ".join(f"{tally}: {what}" for tally, what in sorted(drift.items())))
        states = product.load_many(sorted(self.goals))
        slack = timedelta(minutes=20)
        for goal_id, goal in sorted(self.goals.items()):
            state = states[goal_id]
            outage = sum(((min(e, self.end) - max(s, goal.started_at))
                          for s, e in self.outages if e > goal.started_at and s < self.end),
                         timedelta())
            # Time the goal was listed in /alerts waited for a human, not for it.
            deadline = goal.started_at + goal.turns_needed * (goal.interval + slack) + outage \
                + goal.listed_for + goal.host_delay
            if goal.healthy and not state.terminal and self.end > deadline:
                self.violation(inv.PROGRESS, goal_id,
                               f"a goal whose agent always succeeds is still {state.status} "
                               f"after {goal.turns_done}/{goal.turns_needed} turns, past its "
                               f"deadline {deadline:%Y-%m-%d %H:%M}")
            until = state.updated_at if state.terminal and state.updated_at else self.end
            lived = until - goal.started_at
            self.report.goal_days += max(0.0, lived.total_seconds() / 86400)
            ending = (f"{state.status}/{state.reason}" if state.reason else state.status)
            self.report.endings[ending] = self.report.endings.get(ending, 0) + 1

    # -------------------------------------------------------------- traces

    def trace(self, goal_id: str, limit: int = 80) -> str:
        """The goal's events and what the simulation did to it, in time order."""
        goal = self.goals.get(goal_id)
        lines: list[tuple[datetime, int, str]] = []
        for event in product.events(goal_id) if goal else []:
            lines.append((event["recorded_at"], 0,
                          f"#{event['seq']:<4} {event['kind']:<22} {event['actor']:<10} "
                          f"{_key_data(event['kind'], event['data'])}"))
        for moment, text in goal.notes if goal else []:
            lines.append((moment, 1, f"      ~ {text}"))
        lines.sort(key=lambda line: (line[0], line[1]))
        shown = lines[-limit:]
        head = [] if len(shown) == len(lines) else [f"  … {len(lines) - limit} earlier lines"]
        return "\n".join(head + [f"  {_clock(moment)}  {text}" for moment, _, text in shown])


_KEYS = ("generation", "outcome", "occurrence_id", "reason", "status", "until", "attempt",
         "next_due_at", "due_at", "progress_pct", "gate", "decision", "via", "job_id", "class",
         "retry_after_seconds")


def _key_data(kind: str, data: dict[str, Any]) -> str:
    shown = {k: data[k] for k in _KEYS if data.get(k) not in (None, "")}
    for name in ("occurrence_id",):
        if name in shown and len(str(shown[name])) > 48:
            shown[name] = "…" + str(shown[name])[-44:]
    return " ".join(f"{k}={v}" for k, v in shown.items())


def _clock(moment: datetime) -> str:
    """Virtual time as "d2 14:05:09" (day 1 is the first simulated day)."""
    return f"d{(moment - START).days + 1} {moment:%H:%M:%S}"


def _uuid(rng: random.Random) -> Any:
    import uuid

    return uuid.UUID(int=rng.getrandbits(128), version=4)


def simulate(seed: int, days: float = 7.0, goals: int = 30, **overrides: Any) -> Report:
    """Run one world on the current database (which must hold no goals yet)."""
    return World(Config(seed=seed, days=days, goals=goals, **overrides)).run()


def _outage_end(outages: list[tuple[datetime, datetime]], moment: datetime) -> datetime | None:
    """When the outage ``moment`` falls in ends (None: none does)."""
    return next((end for start, end in outages if start <= moment < end), None)

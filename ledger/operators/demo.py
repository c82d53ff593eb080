"""`manage.py ledger demo`: a handful of realistic goals, so a newcomer who runs
`make run` finds a populated admin.

Every goal is told through the commands the API and the scheduler run
(the application layer's use cases: ``goals.run_goal``, ``work.checkpoint``,
``wakes.fire``, the sweeper's ``sweeps.check``, …), under a frozen clock moved forward step by
step. Nothing writes a Goal or Event row itself, so the histories are real:
``ledger replay --check`` and ``ledger verify`` pass, and internal watchdogs
get their django-q2 schedules exactly as in production.

Times are spread over the last hours before now. Goals still active at the end
(running, paused) are timed so their lease and next wake lie ahead of now: the
scheduler then carries them on like any other goal.
"""

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django_q.models import Schedule

from ledger.domain import Artifact, GoalState, LeaseProof
from ledger.domain.commands import Evidence
from ledger.domain.vocabulary import reset_schedule_name, schedule_name
from ledger.eventstore import clock
from ledger.models import Goal
from ledger.services import goals, jobs, runs, sweeps, tokens, wakes, watchdogs, work
from ledger.services.bodies import Standing
from ledger.services.goals import Caller

ROOT = "/srv/demo"
AGENT = "demo-agent"
SCHEDULER = "scheduler"  # the actor of wakes and sweeps, as in scheduling.tasks
FIRST_KEY = "docs-api-reference"  # the first story's key: counts the sets made so far
# How late after a schedule's next_run the cluster picks it up (it looks every 30 s).
PICKUP_DELAY = timedelta(seconds=12)


@dataclass(frozen=True)
class Made:
    goal_id: str
    goal_key: str
    status: str
    reason: str
    story: str


class Story:
    """One goal's history, told at given minutes before ``base`` (now).

    It plays the agent's workers (holding the raw lease token, as the CLI
    does) and the scheduler (claiming wakes when they are due).
    """

    def __init__(self, base: datetime, key: str, workspace: str):
        self.base = base
        # Moved only forward by at(); starts a day back so the first at() may
        # pick any moment of the last hours.
        self.clock = clock.FrozenClock(base - timedelta(days=1))
        self.key, self.workspace = key, workspace
        self.started: dict[str, Any] | None = None  # run_goal's fields, for every worker
        self.state = GoalState()
        self.token = ""  # the current worker's raw lease token
        self.caller = Caller(AGENT, owner=AGENT)
        self.jobs: dict[str, str] = {}  # the story's name of a job -> its id

    # ------------------------------------------------------------------ time

    def at(self, minutes_ago: float) -> "Story":
        self._move(self.base - timedelta(minutes=minutes_ago))
        return self

    def after_stale(self, seconds: float = 30) -> "Story":
        """Shortly after the current lease may be taken over (expiry + grace):
        when a retrying worker or the once-a-minute sweeper gets to it."""
        # While a lease is held, the evidence expected next (a heartbeat) is
        # due when the lease goes stale: that is the deadline shown.
        deadline = Standing.of(self.state, clock.now()).expected["deadline"]
        assert self.state.lease is not None and deadline, "no lease to go stale"
        self._move(datetime.fromisoformat(deadline) + timedelta(seconds=seconds))
        return self

    def _move(self, moment: datetime) -> None:
        # A history only moves forward; a story that goes back is a bug here.
        if moment < self.clock.current or moment > self.base:
            raise ValueError(f"{self.key}: {moment} is outside {self.clock.current}..{self.base}")
        self.clock.current = moment

    # ------------------------------------------------------------------ agent

    def start(self, objective: str, plan: tuple[str, ...], *, done: tuple[str, ...] = (),
              policy: dict | None = None, session: dict | None = None) -> "Story":
        self.started = {"workspace": self.workspace, "goal_key": self.key,
                        "objective": objective, "done_criteria": done, "next_actions": plan,
                        "policy": policy or {}, "session": session or {}}
        return self.new_worker()

    def new_worker(self) -> "Story":
        """A worker (maybe on another host) runs `wakeledger start`: the same
        run_goal, which takes over the lease once the old one is stale."""
        assert self.started is not None
        self.token = tokens.random_lease()
        answer = goals.run_goal(self.caller, self.token, **self.started)
        self.state = answer.state
        if not answer.lease["acquired"]:
            raise RuntimeError(f"{self.key}: the demo worker did not get the lease")
        return self

    def proof(self) -> LeaseProof:
        assert self.state.lease is not None, "the demo worker holds the lease"
        return LeaseProof(self._digest(), self.state.lease.generation)

    def checkpoint(self, step: str, pct: int, *, done: tuple[str, ...] = (),
                   next_: tuple[str, ...] = (), files: tuple[str, ...] = (),
                   note: str = "", release: bool = False) -> "Story":
        artifacts = tuple(_artifact(path, f"{self.key}:{step}") for path in files)
        work.checkpoint(self.caller, self.goal_id, self.proof(), current_step=step,
                        progress_pct=pct, completed=done, next_actions=next_,
                        artifacts=artifacts, errors=(), note=note, release_lease=release,
                        wake=None, api_url="")
        return self._reload()

    def heartbeat(self) -> "Story":
        goals.heartbeat(self.caller, self.goal_id, self.proof())
        return self._reload()

    def watchdog(self) -> "Story":
        self.state = watchdogs.ensure(self.caller, self.goal_id, self.proof(), tzid="UTC",
                                      api_url="").state
        return self

    def rate_limited(self, error_text: str) -> "Story":
        """What POST /runs does with a provider's error: it classifies the text
        and parses its reset, keeps only those and drops the text."""
        runs.report_run(self.caller, self.goal_id, self.proof(), outcome="error",
                        error_text=error_text)
        return self._reload()

    def ran_ok(self) -> "Story":
        runs.report_run(self.caller, self.goal_id, self.proof(), outcome="ok")
        return self._reload()

    def track(self, name: str, kind: str, ref: str) -> "Story":
        tracked = jobs.track(self.caller, self.goal_id, self.proof(), kind=kind, ref=ref,
                             link="", notify=False)
        self.jobs[name] = tracked.job["job_id"]
        return self._reload()

    def job_done(self, name: str, status: str, conclusion: str) -> "Story":
        jobs.update(self.caller, self.goal_id, self.proof(), self.jobs[name], status=status,
                    conclusion=conclusion)
        return self._reload()

    def ask_approval(self, gate: str, summary: str) -> "Story":
        self.state = work.request_approval(self.caller, self.goal_id, self.proof(), gate=gate,
                                           summary=summary).state
        return self

    def finish(self, summary: str, evidence: dict[str, str] | None = None) -> "Story":
        """Completed, with ``evidence`` as {done criterion: what shows it holds}."""
        items = tuple(Evidence(c, e) for c, e in (evidence or {}).items())
        self.state = work.finish(self.caller, self.goal_id, self.proof(), status="completed",
                                 summary=summary, evidence=items).state
        return self

    @property
    def goal_id(self) -> str:
        return self.state.goal_id

    def _reload(self) -> "Story":
        # The use cases answer what the API does, not always the whole state.
        self.state = goals.state_of(self.caller, self.goal_id)
        return self

    # ------------------------------------------------------------------ scheduler

    def wake(self) -> "Story":
        """The goal's next internal wake fires, standing in for django-q2's
        scheduler: it picks the schedule up a little after its next_run, moves
        the schedule on (a one-off reset wake is deleted), and the task claims
        with the occurrence id ``scheduling.tasks.fire_watchdog`` would use.
        So the ledger and the schedules agree afterwards, as in production,
        and a real cluster does not fire these past occurrences again."""
        goal_id = self.state.goal_id
        reset = self.state.paused_until is not None and self.state.reset_wake is not None
        schedule = Schedule.objects.get(name=reset_schedule_name(goal_id) if reset
                                        else schedule_name(goal_id))
        intended = schedule.next_run
        self._move(intended + PICKUP_DELAY)
        if schedule.schedule_type == Schedule.ONCE:
            schedule.delete()
        else:
            while schedule.next_run <= clock.now():  # django-q2 without catch_up
                schedule.next_run = schedule.calculate_next_run(schedule.next_run)
            schedule.save(update_fields=["next_run"])
        kind = "reset" if reset else "recurring"
        result = wakes.fire(goal_id, intended.isoformat(), kind)
        self.state = result.state
        if result.outcome == "ready_for_pull":
            # Dispatcher "none": the wake made the goal ready; its agent, polling
            # as the skill document says, pulls it by taking the lease.
            self.token = tokens.random_lease()
            goals.acquire(self.caller, goal_id, self.token)
            self._reload()
        return self

    def sweep(self) -> "Story":
        """The lease sweeper's command for this goal (its task sweeps them all,
        which here would touch goals outside the demo)."""
        self.state = sweeps.check(self.goal_id, actor=SCHEDULER).state
        return self

    def _digest(self) -> str:
        return tokens.digest(self.token)


def _artifact(path: str, content: str) -> Artifact:
    data = f"{path}\n{content}\n".encode()
    return Artifact(path, hashlib.sha256(data).hexdigest(), len(data) * 37)


# ----------------------------------------------------------------------------- stories
# Each returns a one-line description; minutes are "minutes before now".


def _completed(s: Story) -> str:
    s.at(372).start("Regenerate the API reference from the OpenAPI schema and fix broken links",
                    ("list endpoints missing from the reference", "regenerate the reference",
                     "fix broken links", "open a pull request"),
                    done=("every endpoint documented", "link checker clean", "CI green"),
                    policy={"lease_seconds": 1800, "cadence_minutes": 60},
                    session={"agent_id": "claude-code"})
    s.at(371).watchdog()
    s.at(355).checkpoint("inventory of undocumented endpoints", 15,
                         done=("found 14 endpoints missing from the reference",),
                         next_=("regenerate the reference",), files=("docs/missing.md",))
    s.at(350).heartbeat()
    s.at(331).checkpoint("reference regenerated", 45, done=("docs/api/ rebuilt from schema",),
                         next_=("fix broken links",), files=("docs/api/reference.md",))
    s.at(325).heartbeat()
    s.wake()  # the hourly watchdog fires while the agent works: worker_busy_noop
    s.at(305).checkpoint("fixed 23 broken links", 70, done=("link checker clean",),
                         next_=("open a pull request", "wait for CI"))
    s.at(300).track("ci-1", "ci", "github-actions run 8812345")
    s.at(290).heartbeat()
    s.at(281).job_done("ci-1", "succeeded", "412 checks passed")
    s.at(279).checkpoint("pull request #311 opened, CI green", 100,
                         done=("PR #311 opened", "CI green"))
    s.at(277).finish("PR #311 merged: reference regenerated, 23 links fixed, CI green", {
        "every endpoint documented": "docs/missing.md lists 14 endpoints, all now in "
                                     "docs/api/reference.md (regenerated from the schema)",
        "link checker clean": "lychee docs/: 0 errors after 23 fixes",
        "CI green": "github-actions run 8812345 succeeded: 412 checks passed",
    })
    return "several checkpoints, a CI job and its watchdog; completed"


def _rate_limited(s: Story) -> str:
    s.at(300).start("Fix the flaky checkout test (test_checkout_applies_coupon)",
                    ("reproduce the flake", "find the race", "fix it",
                     "run the test 50 times"),
                    done=("50 of 50 runs green",), policy={"lease_seconds": 900},
                    session={"agent_id": "claude-code"})
    s.at(288).checkpoint("reproduced: fails 3 times in 50 runs", 25,
                         next_=("find the race",), files=("notes/flake.md",))
    s.at(281).rate_limited("Claude usage limit reached. Your limit will reset in 35 minutes.")
    s.wake()  # the one-off wake at the reset; the agent pulls it, charged with its lease
    s.at(242).heartbeat()
    s.at(236).checkpoint("found the race: the coupon cache is shared between tests", 60,
                         next_=("give each test its own cache",))
    s.at(228).checkpoint("fix: a per-test cache fixture", 85, files=("tests/conftest.py",),
                         next_=("run the test 50 times",))
    s.at(225).heartbeat()
    s.at(214).checkpoint("50 of 50 runs green", 100, done=("flake fixed",))
    s.at(213).ran_ok()
    s.at(212).finish("Flaky checkout test fixed (shared coupon cache); 50/50 runs green", {
        "50 of 50 runs green": "pytest --count=50 tests/test_checkout.py::"
                               "test_checkout_applies_coupon: 50 passed",
    })
    return "rate limited, paused until the reset, resumed by a charged continuation; completed"


def _approval(s: Story) -> str:
    s.at(150).start("Add the missing index on orders(customer_id, created_at)",
                    ("write the migration", "measure it on the staging copy",
                     "ask for the go-ahead", "run it on production"),
                    policy={"lease_seconds": 1200}, session={"agent_id": "claude-code"})
    s.at(138).checkpoint("migration written", 30,
                         files=("migrations/0042_orders_customer_created_idx.py",),
                         next_=("measure it on the staging copy",))
    s.at(120).heartbeat()
    s.at(104).checkpoint("measured on staging: 4 min, CONCURRENTLY, no table lock", 60,
                         next_=("ask for the go-ahead", "run it on production"))
    s.at(101).ask_approval(
        "run-on-production",
        "Creates an index CONCURRENTLY on orders (38 M rows, about 4 min on staging). "
        "Needs a DBA's go-ahead.")
    return "waits at the approval gate run-on-production (try `ledger approve`)"


def _takeover(s: Story) -> str:
    s.at(240).start("Upgrade billing to Django 5.2 and fix the deprecation warnings",
                    ("bump Django", "fix deprecation warnings", "run the test suite"),
                    policy={"lease_seconds": 600}, session={"agent_id": "codex"})
    s.at(236).checkpoint("Django bumped to 5.2", 20, files=("pyproject.toml",),
                         next_=("fix deprecation warnings",))
    s.at(232).heartbeat()
    # The worker's host rebooted: no more heartbeats. Another worker retries
    # once the lease is past its expiry plus the stale grace, and takes over.
    s.after_stale().new_worker()
    s.at(215).checkpoint("fixed 7 deprecation warnings", 60, files=("billing/settings.py",),
                         next_=("run the test suite",),
                         note="resumed from the 20 % checkpoint after a takeover")
    s.at(205).heartbeat()
    s.at(198).checkpoint("test suite green", 100, done=("no deprecation warnings left",))
    s.at(196).finish("Billing runs on Django 5.2; taken over from a vanished worker")
    return "its first worker vanished; taken over after expiry + grace; completed"


def _interrupted(s: Story) -> str:
    s.at(130).start("Translate the help centre into German",
                    ("extract the articles", "translate 120 articles", "check the glossary"),
                    policy={"lease_seconds": 900, "cadence_minutes": 20},
                    session={"agent_id": "claude-code"})
    s.at(129).watchdog()
    s.at(122).checkpoint("extracted 120 articles", 10, next_=("translate 120 articles",))
    s.at(116).checkpoint("translated 30 of 120 articles", 35, files=("help/de/part-1.po",),
                         next_=("translate articles 31-120",), release=True)
    s.wake()  # a continuation takes the lease... and is never heard from again
    s.after_stale().sweep()  # no sign of life by expiry + grace: INTERRUPTED_UNKNOWN
    return "a continuation went silent: blocked INTERRUPTED_UNKNOWN (try `ledger recover`)"


def _running(s: Story) -> str:
    s.at(80).start("Re-index the product catalogue into the new search cluster",
                   ("snapshot the catalogue", "bulk-index 2.4 M products",
                    "compare hit counts", "switch the alias"),
                   policy={"lease_seconds": 1800, "cadence_minutes": 30},
                   session={"agent_id": "claude-code"})
    s.at(79).watchdog()
    s.at(70).checkpoint("snapshot taken: 2,412,880 products", 10,
                        next_=("bulk-index 2.4 M products",))
    s.at(60).heartbeat()
    s.at(52).checkpoint("indexed 800 k of 2.4 M", 35)
    s.wake()  # due while the agent holds the lease: worker_busy_noop
    s.at(45).heartbeat()
    s.at(33).checkpoint("indexed 1.6 M of 2.4 M", 62, next_=("index the last batch",))
    s.at(30).track("batch-3", "reindex", "batch 3 of 3 (800 k products)")
    s.wake()
    s.at(15).heartbeat()
    s.at(8).checkpoint("indexed 2.1 M of 2.4 M", 80,
                       next_=("compare hit counts", "switch the alias"))
    s.at(4).heartbeat()
    return "still running: lease held, internal watchdog live, a blocking job running"


def _paused(s: Story) -> str:
    s.at(40).start("Write the 0.9 changelog from the merged pull requests",
                   ("collect merged PRs since 0.8", "group them by area", "write the entries"),
                   policy={"lease_seconds": 900}, session={"agent_id": "codex"})
    s.at(33).checkpoint("collected 57 merged PRs", 30, next_=("group them by area",),
                        files=("CHANGELOG.draft.md",))
    s.at(26).heartbeat()
    s.at(21).rate_limited("Error code: 429 - Rate limit reached for gpt-5-codex on tokens "
                          "per min. Please try again in 48m0s.")
    return "paused by a rate limit; its one-off wake fires after the reset"


# (goal key, workspace under ROOT, story)
STORIES: tuple[tuple[str, str, Callable[[Story], str]], ...] = (
    (FIRST_KEY, "docs-site", _completed),
    ("checkout-flaky-test", "shop", _rate_limited),
    ("orders-index", "orders-db", _approval),
    ("django-5.2-upgrade", "billing", _takeover),
    ("help-centre-de", "help-centre", _interrupted),
    ("search-reindex", "search", _running),
    ("changelog-0.9", "cli", _paused),
)


# ----------------------------------------------------------------------------- entry


def existing() -> list[Goal]:
    return list(Goal.objects.filter(workspace__startswith=f"{ROOT}/").order_by("created_at"))


def create(*, base: datetime | None = None) -> list[Made]:
    """Make one set of demo goals, all or nothing: events cannot be deleted,
    so a half-made demo would stay forever."""
    base = base or clock.now()
    number = 1 + Goal.objects.filter(workspace__startswith=f"{ROOT}/",
                                     goal_key__startswith=FIRST_KEY).count()
    made = []
    with transaction.atomic():
        for key, folder, tell in STORIES:
            # Later sets get their own keys and workspaces: demo goals that are
            # still active hold their workspace bindings.
            story = (Story(base, key, f"{ROOT}/{folder}") if number == 1 else
                     Story(base, f"{key}-{number}", f"{ROOT}/set-{number}/{folder}"))
            with clock.use(story.clock):
                text = tell(story)
            state = story.state
            made.append(Made(state.goal_id, state.goal_key, state.status, state.reason, text))
    return made


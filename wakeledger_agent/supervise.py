"""``wakeledger supervise``: any agent CLI run under a goal's lease.

    wakeledger supervise --workspace W --goal-key K [--objective …] [--done …] \\
        [--until-done] [--resume-cmd "codex exec resume {session_key} {prompt}"] \\
        -- codex exec "fix the flaky test"

Starts or attaches to the goal, runs the command with the goal and its lease
in the environment (never on the command line), renews the lease while it
runs, and reports the run when it ends: exit 0 is the end of a turn (the
lease is released), a provider's limit notice in its last lines pauses the
goal until the reset, any other failure is reported as its class. The output
is classified here, on the agent's machine, and only the class and the reset
instant are sent: the text never leaves it. A command silent past
``--silent-limit`` (no output, no checkpoint) is taken for hung: the
heartbeats stop, it is stopped, and the run is reported as an unclassified
failure. With ``--until-done`` the supervisor then waits for the goal's wake,
pulls it like an agent does, and runs the resume command, until the goal ends
or needs a human.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from ledger.domain.events import iso
from ledger.domain.vocabulary import resume_prompt
from wakeledger_agent import child as childrun
from wakeledger_agent import client, hostwait, runend, sessions
from wakeledger_agent.errors import (
    EXIT_CONFLICT,
    EXIT_OK,
    EXIT_TERMINAL,
    EXIT_USAGE,
    CliError,
)
from wakeledger_agent.leases import FileLeases
from wakeledger_agent.waiting import Progress, Step, budget, instant, next_step

# A wake the scheduler should have fired SCHEDULER_LATENESS ago and has not:
# its agent pulls anyway (the server decides whether anything is due). The
# server's own lateness, after which it calls a wake missed (imported: the
# agent package may use the pure domain).

# Answers after which a lease will never work again: the agent released it
# itself, finished the goal or asked for an approval, or another holder has it.
LEASE_GONE = ("lease_lost", "lease_required", "goal_terminal", "goal_blocked")

# A command silent this long (no byte of output, no checkpoint) is taken for
# hung: 30 minutes, half the server's 60 min progress deadline (NO_PROGRESS),
# so that supervise, which sees the output, speaks first, yet far beyond the
# quiet stretches of a working agent (a long test run it does not echo).
SILENT_LIMIT = 1800.0
SILENT_LIMIT_MAX = 7 * 24 * 3600.0  # a week; more is a typo (milliseconds?)
SILENT_ENV = "WAKELEDGER_SILENT_LIMIT"


class Api(Protocol):
    """The one call the supervisor needs from the HTTP client (client.Client)."""

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any: ...


class LeaseStore(Protocol):
    """What the supervisor needs of the lease store (leases.FileLeases)."""

    def save(self, goal_id: str, lease: dict[str, Any]) -> None: ...

    def forget(self, goal_id: str) -> None: ...

    def set_current(self, goal_id: str) -> None: ...


def code_of(error: Exception) -> str:
    """The problem code of an API error ("unreachable" for a network error)."""
    code = getattr(error, "code", "")
    return code if isinstance(code, str) else ""


# ---------------------------------------------------------------- options


@dataclass
class Options:
    workspace: str
    goal_key: str
    command: list[str]
    objective: str = ""
    done: list[str] = field(default_factory=list)
    next: list[str] = field(default_factory=list)
    resume_cmd: list[str] | None = None  # an argv template (shlex-split once)
    until_done: bool = False
    session_key: str = ""
    lease_seconds: int | None = None
    timezone: str = "UTC"
    poll_seconds: float = 30.0
    silent_limit: float = SILENT_LIMIT  # 0: never taken for hung


def local_zone() -> str:
    """The IANA zone this machine prints wall times in ("try again at 6:44
    PM" is the agent's local time): TZ, else /etc/localtime's target, else UTC."""
    given = os.environ.get("TZ", "").lstrip(":")
    if re.fullmatch(r"[A-Za-z]+(?:/[A-Za-z0-9_+-]+)*", given or "-"):
        return given
    try:
        target = str(Path("/etc/localtime").resolve())
    except OSError:
        return "UTC"
    return target.split("zoneinfo/", 1)[1] if "zoneinfo/" in target else "UTC"


# ---------------------------------------------------------------- reporting a run


@dataclass(frozen=True)
class Verdict:
    outcome: str  # ok | error
    error_class: str = ""
    why: str = ""  # for a human on stderr: never the output itself
    body: dict[str, Any] = field(default_factory=lambda: {"outcome": "ok"})  # POST /runs

    @property
    def reset_at(self) -> datetime | None:
        return instant(self.body.get("retry_after"))


def judge(ended: childrun.Ended, now: datetime, tz: str) -> Verdict:
    """Exit 0 is a clean end of turn; otherwise the output's last lines decide
    the class, read on this machine like the hooks read Claude Code's
    (runend: the API's own classifier and reset parser), and the report
    carries the class's fixed phrase and the reset, never the output. A
    child killed by a signal (SIGKILL, an OOM kill) whose tail names no known
    failure is a crash: ``unclassified``, the class of an unknown failure,
    which blocks the goal for a human (it may have stopped half-way through a
    side effect)."""
    if ended.returncode == 0 and ended.signal is None:
        return Verdict("ok")
    how = (f"killed by signal {ended.signal}" if ended.signal
           else f"exited with status {ended.returncode}")
    body = runend.run_report(None, ended.tail, now=now, tz=tz)
    return Verdict("error", runend.failure_class(None, ended.tail), how, body)


def judge_silence(limit: float) -> Verdict:
    """A command stopped for its silence: an unknown failure whatever it
    printed or exited with (its end is our doing), reported with a fixed
    phrase that names only the limit, which blocks the goal for a human: a
    hung agent may hang again, or have stopped half-way through a side
    effect, and a human decides whether it resumes."""
    phrase = runend.silent_phrase(limit)
    return Verdict("error", runend.failure_class(None, phrase),
                   f"stopped after {limit:g} s without output",
                   {"outcome": "error", "error_text": phrase, "retry_after": ""})


# ---------------------------------------------------------------- resuming


PLACEHOLDER = re.compile(r"\{(goal_id|session_key|prompt)\}")


def fill(template: list[str], values: dict[str, str]) -> list[str]:
    """Placeholders filled per argv element, in one pass (a value is never
    scanned again) and without a shell: a prompt is always one argument."""
    return [PLACEHOLDER.sub(lambda m: values[m.group(1)], part) for part in template]


# ---------------------------------------------------------------- the supervisor


class Supervisor:
    """One ``supervise`` invocation: its goal, its current lease, its runs."""

    def __init__(self, api: Api, leases: LeaseStore, opts: Options, base_url: str,
                 progress: Progress | None = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)):
        self.api, self.leases, self.opts, self.base_url = api, leases, opts, base_url
        self.progress = progress or Progress()
        self.clock = clock
        self.goal_id = ""
        self.lease: dict[str, Any] | None = None
        self.lease_seconds = 600.0
        self.checkpoint_seq: int | None = None  # the goal's, at the last look
        self.waits = hostwait.Seen()  # the provider waits this run reported

    # ------------------------------------------------------------ leases

    def start(self) -> dict[str, Any]:
        """POST /goals: create or attach to the goal, taking its lease if free."""
        opts = self.opts
        body: dict[str, Any] = {"goal_key": opts.goal_key, "workspace": opts.workspace,
                                "objective": opts.objective or f"supervised: {opts.goal_key}",
                                "done_criteria": opts.done, "next_actions": opts.next}
        if opts.session_key:
            body["session"] = {"session_key": opts.session_key}
        if opts.lease_seconds:
            body["policy"] = {"lease_seconds": opts.lease_seconds}
        answer = self.api.call("POST", "goals", body)
        self.goal_id = answer["goal"]["id"]
        self.leases.set_current(self.goal_id)
        self.lease_seconds = float((answer["goal"].get("policy") or {})
                                   .get("lease_seconds") or self.lease_seconds)
        return answer

    def hold(self, answer: dict[str, Any]) -> None:
        lease = answer["lease"]
        self.lease = {"token": lease["token"], "generation": lease["generation"]}
        # Saved in the lease store too, so that the child's own `wakeledger
        # checkpoint` (same state directory) finds it.
        self.leases.save(self.goal_id, self.lease)

    def drop(self) -> None:
        self.lease = None
        self.leases.forget(self.goal_id)

    def fenced(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.api.call("POST", f"goals/{self.goal_id}/{path}",
                             {"lease": self.lease, **(body or {})})

    def release(self) -> None:
        """Give the lease back, unless the child already did (or finished)."""
        if self.lease is None:
            return
        try:
            self.fenced("lease/release")
        except CliError as error:
            if code_of(error) not in LEASE_GONE:
                raise
        finally:
            self.drop()

    # ------------------------------------------------------------ one run

    def child_env(self) -> dict[str, str]:
        assert self.lease is not None
        return {**os.environ, "WAKELEDGER_URL": self.base_url,
                "WAKELEDGER_GOAL_ID": self.goal_id,
                "WAKELEDGER_LEASE_TOKEN": self.lease["token"],
                "WAKELEDGER_LEASE_GENERATION": str(self.lease["generation"])}

    def heartbeat(self) -> childrun.Heartbeat:
        # A third of the lease: two beats may be lost to the network before it lapses.
        return childrun.Heartbeat(lambda: self.fenced("lease/heartbeat"),
                                  max(1.0, self.lease_seconds / 3),
                                  lambda error: code_of(error) in LEASE_GONE)

    def last_checkpoint(self) -> int | None:
        """The goal's ``last_checkpoint_seq`` (None when the server cannot be
        asked): one GET at a run's start (the mark) and one each time the
        silence limit is reached, never on a schedule of its own."""
        try:
            seq = self.api.call("GET", f"goals/{self.goal_id}").get("last_checkpoint_seq")
        except CliError:
            return None
        return seq if isinstance(seq, int) else None

    def checkpointed(self) -> bool:
        """Whether the command recorded a checkpoint since the last look: an
        agent that prints nothing but checkpoints is working, not hung. No
        answer is no sign of life (the output said none either)."""
        seen, self.checkpoint_seq = self.checkpoint_seq, self.last_checkpoint()
        return None not in (seen, self.checkpoint_seq) and seen != self.checkpoint_seq

    def silence(self) -> childrun.Silence | None:
        limit = self.opts.silent_limit
        if not limit:
            return None
        self.checkpoint_seq = self.last_checkpoint()  # the mark later looks compare with
        return childrun.Silence(limit, self.checkpointed)

    def silent(self) -> None:
        self.progress.say(
            f"the agent produced no output (and no checkpoint) for {self.opts.silent_limit:g} s"
            f" (--silent-limit): lease no longer renewed; stopping it (SIGTERM, SIGKILL after "
            f"{childrun.SILENCE_GRACE:g} s)")

    def provider_wait(self, line: str) -> None:
        """An output line saying the host waits inside its own retry for the
        provider's reset (``hostwait``): the goal shows it (a note, class and
        reset only), and the silence limit counts from the reset."""
        wait = self.waits.new(line, self.clock())
        if wait is not None and self.lease is not None:
            try:
                self.fenced("runs", runend.wait_report(wait.error_class, wait.until))
                self.progress.say(f"the agent waits for its provider until {iso(wait.until)} "
                                  f"({wait.error_class}); goal {self.goal_id} shows it")
            except CliError as error:
                self.progress.say(f"the provider wait was not recorded ({error})")

    def run_once(self, argv: list[str], interrupts: childrun.Interrupts,
                 fresh: list[str] | None = None) -> childrun.Ended:
        self.progress.clear()
        beat = self.heartbeat()
        self.waits = hostwait.Seen(self.silence())
        ended = childrun.run(argv, self.child_env(), interrupts, beat, self.waits.silence,
                             self.silent, self.provider_wait)
        if beat.lost is not None:
            self.drop()  # the child released it or ended the goal; nothing to report with
        if ended.interrupted:
            self.release()  # Ctrl-C: the goal stays resumable, nothing is reported
            self.progress.say(f"interrupted: lease released; goal {self.goal_id} stays "
                              "resumable")
            return ended
        if fresh and ended.returncode and sessions.no_saved_chat(ended.tail) and self.lease:
            self.fenced("runs", {"outcome": "note", "note": "new_session"})  # see ``sessions``
            self.progress.say("no saved chat to resume: a new session, with the resume packet")
            return self.run_once(fresh, interrupts)
        if ended.silenced is not None:
            self.report(judge_silence(ended.silenced))
        else:
            self.report(judge(ended, self.clock(), self.opts.timezone))
        return ended

    def report(self, verdict: Verdict) -> None:
        """POST /runs with the verdict; a clean end of turn also releases."""
        if self.lease is None:
            return
        try:
            answer = self.fenced("runs", verdict.body)
        except CliError as error:
            if code_of(error) not in LEASE_GONE:
                raise
            self.drop()
            return
        if verdict.outcome == "ok":
            self.release()
            self.progress.say(f"run ended cleanly; lease released (goal {self.goal_id})")
            return
        self.drop()  # a failure report ends the lease: paused, blocked or failed
        until = answer.get("paused_until")
        self.progress.say(
            f"run {verdict.why}: {verdict.error_class}; goal {answer.get('status')}"
            + (f" until {until}" if until else "")
            + (f" ({answer.get('reason')})" if answer.get("reason") else "")
            + f", continuations {answer['continuations']['used']}/"
              f"{answer['continuations']['max']}")

    # ------------------------------------------------------------ waiting

    def await_wake(self, interrupts: childrun.Interrupts) -> tuple[int | None, dict | None]:
        """Wait for the goal's wake and pull it: (None, the lease answer), or
        (an exit code, None) when the goal ended, needs a human or we were
        interrupted."""
        while interrupts.received is None:
            goal = self.api.call("GET", f"goals/{self.goal_id}")
            step = next_step(goal, self.clock(), self.opts.poll_seconds)
            if step.action == "terminal":
                self.progress.say(f"{step.why}; done supervising")
                return (EXIT_OK if goal["status"] == "done" else EXIT_TERMINAL), None
            if step.action == "human":
                self.progress.say(f"{step.why}; stopping (an operator recovers it, then "
                                  "run supervise again)")
                return EXIT_CONFLICT, None
            if step.action == "pull":
                answer = self.pull()
                if answer is not None:
                    return None, answer
                step = Step("wait", min(self.opts.poll_seconds, 5.0), "the pull was refused")
            self.sleep(step, goal, interrupts)
        return 128 + interrupts.received, None

    def pull(self) -> dict[str, Any] | None:
        """POST /lease, as an agent pulls a ready wake; None when refused."""
        try:
            answer = self.api.call("POST", f"goals/{self.goal_id}/lease", {})
        except CliError as error:
            if code_of(error) in ("goal_blocked", "goal_terminal"):
                return None  # the next look at the goal says what to do
            raise
        return answer if answer.get("acquired") else None

    def sleep(self, step: Step, goal: dict[str, Any], interrupts: childrun.Interrupts) -> None:
        """Sleep ``step.seconds`` (a Ctrl-C ends it), redrawing the progress
        line every second on a terminal."""
        deadline = time.monotonic() + max(0.2, step.seconds)
        while (left := deadline - time.monotonic()) > 0:
            self.progress.show(f"goal {self.goal_id[:8]} {step.line(self.clock())} · "
                               f"{budget(goal)}")
            if interrupts.event.wait(min(1.0, left)):
                return

    # ------------------------------------------------------------ the whole

    def resume_argv(self, answer: dict[str, Any], fresh: bool = False) -> list[str]:
        template = self.opts.resume_cmd or self.opts.command
        template = (sessions.fresh_command(template) or []) if fresh else template
        packet = answer.get("resume_packet") or {}
        values = {"goal_id": self.goal_id, "session_key": self.opts.session_key,
                  "prompt": resume_prompt(packet, self.goal_id)}
        return fill(template, values)

    def supervise(self) -> int:
        with childrun.Interrupts() as interrupts:
            answer: dict[str, Any] | None = self.start()
            argv, fresh = self.opts.command, []
            if not answer.get("acquired"):
                if not self.opts.until_done:
                    self.progress.say(_refusal(answer))
                    return EXIT_CONFLICT
                answer = None
            while True:
                if answer is None:
                    code, answer = self.await_wake(interrupts)
                    if code is not None:
                        self.progress.clear()
                        return code
                    assert answer is not None
                    argv, fresh = self.resume_argv(answer), self.resume_argv(answer, True)
                    reason = (answer.get("resumed") or {}).get("reason", "a wake")
                    self.progress.say(f"resuming goal {self.goal_id} ({reason})")
                self.hold(answer)
                ended = self.run_once(argv, interrupts, fresh)
                if ended.interrupted:
                    return 128 + ended.interrupted  # 130 for Ctrl-C, as shells report it
                if not self.opts.until_done:
                    return ended.returncode
                answer = None


def _refusal(answer: dict[str, Any]) -> str:
    action = answer.get("next_required_action") or "refused"
    wait = answer.get("retry_after_seconds")
    return (f"the goal's lease was not granted ({action}"
            + (f", retry after {wait} s)" if wait else ")")
            + "; pass --until-done to wait for its wake")


# ---------------------------------------------------------------- the command line


def silent_limit(given: str | None, environ: Mapping[str, str] | None = None) -> float:
    """--silent-limit, else WAKELEDGER_SILENT_LIMIT, else 30 minutes: seconds,
    0 to never take the command for hung. Strict: a value that is not a plain
    number in range is an error, not the default (a typo must not quietly
    leave a hung agent holding its goal, nor kill a working one)."""
    env = os.environ if environ is None else environ
    source, value = ("--silent-limit", given) if given is not None else (
        SILENT_ENV, env.get(SILENT_ENV))
    if value is None or (source == SILENT_ENV and not value.strip()):
        return SILENT_LIMIT
    text = value.strip()
    seconds = float(text) if re.fullmatch(r"[0-9]+(?:\.[0-9]+)?", text) else -1.0
    if seconds != 0 and not 1 <= seconds <= SILENT_LIMIT_MAX:
        raise ValueError(f"{source} must be a number of seconds: 0 (never) or 1 to "
                         f"{SILENT_LIMIT_MAX:g}; got {value!r}")
    return seconds


def options(args: Any) -> Options:
    """Options from parsed arguments, or a ValueError saying what is wrong."""
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise ValueError("give the agent command after --: wakeledger supervise … -- CMD ARGS")
    resume = shlex.split(args.resume_cmd) if args.resume_cmd else None
    if resume is not None and not resume:
        raise ValueError("--resume-cmd is empty")
    if resume and any("{session_key}" in part for part in resume) and not args.session_key:
        raise ValueError("--resume-cmd uses {session_key}: pass --session-key")
    if not 0.2 <= args.poll_seconds <= 3600:
        raise ValueError("--poll-seconds must be between 0.2 and 3600")
    silent = silent_limit(getattr(args, "silent_limit", None))
    return Options(workspace=args.workspace, goal_key=args.goal_key, command=command,
                   objective=args.objective, done=args.done, next=args.next,
                   resume_cmd=resume, until_done=args.until_done,
                   session_key=args.session_key, lease_seconds=args.lease_seconds,
                   timezone=args.timezone or local_zone(), poll_seconds=args.poll_seconds,
                   silent_limit=silent)


def main(args: Any, api: Api | None = None, leases: LeaseStore | None = None) -> int:
    """The ``supervise`` subcommand (its arguments: wakeledger_agent/cli.py,
    SUPERVISE): its exit code. An API error ends it with the CLI's exit code
    for its class, after giving back any lease it held."""
    try:
        opts = options(args)
        api = api or client.from_env()
    except (ValueError, CliError) as error:
        print(f"wakeledger: {error}", file=sys.stderr)
        return getattr(error, "exit_code", EXIT_USAGE)
    supervisor = Supervisor(api, leases or FileLeases(), opts, getattr(api, "base", ""))
    try:
        return supervisor.supervise()
    except CliError as error:
        supervisor.progress.say(str(error))
        # The server unreachable: the lease lapses by itself.
        with contextlib.suppress(CliError):
            supervisor.release()
        return error.exit_code

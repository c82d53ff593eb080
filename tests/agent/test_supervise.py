"""`wakeledger supervise` without a server: how a run's end is judged and
reported (the provider texts of tests/domain/test_failures.py), what a waiting
supervisor does next, and how the resume command is filled in."""

import io
from datetime import UTC, datetime, timedelta

import pytest

from ledger.domain.failures import AUTH, OWNER_VERIFICATION, RATE_LIMIT, UNCLASSIFIED, classify
from ledger.domain.resets import parse_reset
from wakeledger_agent.child import Ended, Interrupts, Tail
from wakeledger_agent.runend import PHRASES
from wakeledger_agent.supervise import (
    LEASE_GONE,
    Options,
    Supervisor,
    code_of,
    fill,
    judge,
)
from wakeledger_agent.waiting import Progress, next_step, span

NOW = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)

# Real provider texts (sources in tests/domain/test_failures.py) and the reset each names.
CODEX = ("■ You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) "
         "or try again in 3 hours 2 minutes.")
CLAUDE_CODE = "5-hour limit reached ∙ resets 1am"
ANTHROPIC_API = ('[{"error":"Error: 429 {\\"type\\":\\"error\\",\\"error\\":{\\"type\\":'
                 '\\"rate_limit_error\\",\\"message\\":\\"This request would exceed your '
                 'account\'s rate limit. Please try again later.\\"}}","timestamp":'
                 '"2025-11-11T16:40:06.075Z"}]')
OPENAI = ("openai.error.RateLimitError: Rate limit reached for gpt-4 in organization "
          "org-uVqpjtJiKqvVJMVfvpaounIh on tokens per min (TPM): Limit 10000, Used 8554, "
          "Requested 3082. Please try again in 9.816s. Visit "
          "https://platform.openai.com/account/rate-limits to learn more.")
GEMINI = ('{"error":{"code":429,"status":"RESOURCE_EXHAUSTED",\n  "details":[{"@type":'
          '"…/google.rpc.RetryInfo","retryDelay":"38s"}]}}')


def ended(tail: str, code: int = 1, sig: int | None = None) -> Ended:
    return Ended(code, sig, tail, None)


# The phrase sent: "usage limit" for a usage window (or a quota: Gemini's
# RESOURCE_EXHAUSTED), "rate limit" for a per-minute limit (the server's per-minute backoff).
USAGE, RATE = "usage limit", PHRASES[RATE_LIMIT]


@pytest.mark.parametrize(("text", "reset", "phrase"), [
    (CODEX, datetime(2026, 12, 2, 12, 2, tzinfo=UTC), USAGE),
    (CLAUDE_CODE, datetime(2026, 12, 3, 1, 0, tzinfo=UTC), USAGE),
    (ANTHROPIC_API, None, RATE),
    # 9.816 s, to the second rounded up: waking a moment early meets the limit again.
    (OPENAI, datetime(2026, 12, 2, 9, 0, 10, tzinfo=UTC), RATE),
    (GEMINI, datetime(2026, 12, 2, 9, 0, 38, tzinfo=UTC), USAGE),
], ids=["codex", "claude-code", "anthropic-api", "openai", "gemini"])
def test_a_limit_notice_in_the_last_lines_is_a_rate_limit_with_its_reset(text, reset, phrase):
    tail = "\n".join(["working on it…", "ran 12 tests", text])
    verdict = judge(ended(tail), NOW, "UTC")
    assert (verdict.outcome, verdict.error_class, verdict.reset_at) == ("error", RATE_LIMIT,
                                                                        reset)
    # Only the class (its fixed phrase) and the reset reach the server, never the output.
    assert verdict.body == {"outcome": "error", "error_text": phrase,
                            "retry_after": reset.isoformat() if reset else ""}
    assert classify(verdict.body["error_text"]) == RATE_LIMIT
    if reset is None:
        assert parse_reset(verdict.body["error_text"], now=NOW) is None  # the server's backoff


def test_exit_zero_is_a_clean_end_of_turn_even_when_limits_are_mentioned():
    assert judge(ended(CODEX, code=0), NOW, "UTC").body == {"outcome": "ok"}


def test_a_killed_child_is_a_crash_reported_as_an_unknown_failure():
    verdict = judge(ended("step 3 of 5…", code=137, sig=9), NOW, "UTC")
    assert (verdict.error_class, verdict.why) == (UNCLASSIFIED, "killed by signal 9")
    assert verdict.body == {"outcome": "error", "error_text": PHRASES[UNCLASSIFIED],
                            "retry_after": ""}
    assert classify(verdict.body["error_text"]) == UNCLASSIFIED
    assert judge(ended("", code=3), NOW, "UTC").why == "exited with status 3"


def test_auth_and_verification_notices_keep_their_class():
    auth = "API Error: 401 {\"type\":\"error\",\"error\":{\"type\":\"authentication_error\"}}"
    assert judge(ended(auth), NOW, "UTC").error_class == AUTH
    owner = "Your organization must be verified to stream this model."
    assert judge(ended(owner), NOW, "UTC").error_class == OWNER_VERIFICATION


def test_the_tail_keeps_the_last_lines_without_terminal_colours():
    tail = Tail(lines=3)
    for n in range(10):
        tail.add(f"line {n}\r\n".encode())
    tail.add(b"\x1b[1;31mYou've hit your\x1b[0m usage limit")
    assert tail.text() == "line 8\nline 9\nYou've hit your usage limit"


def goal(**fields):
    return {"status": "waiting", "liveness": "scheduled", "pending_approvals": [],
            "ready": {}, "alert": None, "next_wake_at": None, "paused_until": None, **fields}


def test_a_waiting_supervisor_pulls_only_a_due_wake():
    soon = (NOW + timedelta(minutes=72)).isoformat()
    step = next_step(goal(next_wake_at=soon), NOW, 30)
    assert (step.action, step.seconds) == ("wait", 30)
    assert step.line(NOW) == "waiting · next wake in 1h 12m"
    assert step.line(NOW + timedelta(minutes=71, seconds=51)) == "waiting · next wake in 9s"
    assert step.line(NOW + timedelta(hours=2)).endswith("wake due, waiting for the scheduler")
    assert next_step(goal(next_wake_at=(NOW + timedelta(seconds=4)).isoformat()), NOW,
                     30).seconds == 4
    assert next_step(goal(ready={"reason": "rate_limit_reset"}, liveness="ready"), NOW,
                     30).action == "pull"
    # The scheduler is minutes late: the agent pulls without it.
    late = (NOW - timedelta(minutes=6)).isoformat()
    assert next_step(goal(next_wake_at=late, liveness="overdue"), NOW, 30).action == "pull"
    assert next_step(goal(status="paused", paused_until=soon), NOW, 30).action == "wait"


@pytest.mark.parametrize("reason", ["NO_PROGRESS", "WAKE_NOT_FIRING", "HOST_SILENT",
                                    "JOB_SILENT"])
def test_a_listing_that_does_not_block_the_goal_does_not_stop_the_wait(reason):
    """Alerts that list the goal for a human but that its next run answers
    (a checkpoint clears NO_PROGRESS): the supervisor goes on."""
    listed = goal(liveness="needs_human", alert={"reason": reason}, ready={"reason": "x"})
    assert next_step(listed, NOW, 30).action == "pull"
    pending = goal(liveness="needs_human", alert={"reason": "PENDING_NATIVE_CLEANUP"})
    assert next_step(pending, NOW, 30).action == "human"


def test_never_while_an_approval_is_pending_or_a_human_is_needed():
    pending = goal(status="blocked", reason="BLOCKED_APPROVAL", liveness="needs_human",
                   pending_approvals=[{"gate": "deploy"}], ready={"reason": "x"})
    step = next_step(pending, NOW, 30)
    assert step.action == "wait" and "deploy" in step.why
    blocked = goal(status="blocked", reason="UNCLASSIFIED", liveness="needs_human",
                   alert={"reason": "UNCLASSIFIED"})
    assert next_step(blocked, NOW, 30).action == "human"
    for status in ("done", "failed", "stopped"):
        assert next_step(goal(status=status), NOW, 30).action == "terminal"


def test_the_resume_command_is_filled_per_argument_without_a_shell():
    template = ["codex", "exec", "resume", "{session_key}", "--", "{prompt}"]
    argv = fill(template, {"goal_id": "g", "session_key": "{prompt}",
                           "prompt": "say $(rm -rf /); and {goal_id}"})
    assert argv == ["codex", "exec", "resume", "{prompt}", "--",
                    "say $(rm -rf /); and {goal_id}"]


def test_spans_read_like_a_person_would_say_them():
    assert [span(s) for s in (4320, 245, 9, -3)] == ["1h 12m", "4m 05s", "9s", "0s"]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_line_is_drawn_on_a_terminal_and_nothing_in_a_pipe():
    terminal, pipe = Terminal(), io.StringIO()
    for stream in (terminal, pipe):
        Progress(stream).show("goal 1a2b3c4d waiting · next wake in 1h 12m · "
                              "continuations 1/3")
    assert terminal.getvalue() == ("\r\x1b[Kwakeledger: goal 1a2b3c4d waiting · next wake in "
                                   "1h 12m · continuations 1/3")
    assert pipe.getvalue() == ""


class FakeApi:
    """The goal as the API would show it, one answer per look."""

    def __init__(self, looks):
        self.looks, self.calls = list(looks), []

    def call(self, method, path, body=None):
        self.calls.append((method, path))
        if method == "GET":
            return self.looks.pop(0) if len(self.looks) > 1 else self.looks[0]
        return {"acquired": True, "lease": {"token": "wll_x", "generation": 2},
                "resumed": {"reason": "scheduled_progress", "charged": False},
                "resume_packet": {"objective": "o", "checkpoint": {}}}


def waiting_supervisor(api):
    opts = Options(workspace="/w", goal_key="k", command=["agent"], until_done=True,
                   poll_seconds=0.2)
    supervisor = Supervisor(api, leases=None, opts=opts, base_url="http://x/api/v1",
                            progress=Progress(io.StringIO()), clock=lambda: NOW)
    supervisor.goal_id = "g"
    return supervisor


def test_the_supervisor_waits_out_an_approval_and_pulls_the_wake_its_decision_arms():
    pending = goal(status="blocked", reason="BLOCKED_APPROVAL", liveness="needs_human",
                   pending_approvals=[{"gate": "deploy"}])
    approved = goal(ready={"reason": "scheduled_progress"}, liveness="ready",
                    continuations_used=1, policy={"max_continuations": 3})
    api = FakeApi([pending, pending, approved])
    code, answer = waiting_supervisor(api).await_wake(Interrupts())
    assert code is None and answer["lease"]["generation"] == 2
    # Never a pull while the approval was pending: only after the operator's decision.
    assert api.calls == [("GET", "goals/g")] * 3 + [("POST", "goals/g/lease")]


@pytest.mark.parametrize(("looks", "code"), [
    ([goal(status="done")], 0),
    ([goal(status="stopped")], 7),
    ([goal(status="blocked", reason="UNCLASSIFIED", liveness="needs_human")], 8),
])
def test_the_supervisor_stops_at_a_terminal_goal_or_one_that_needs_a_human(looks, code):
    api = FakeApi(looks)
    assert waiting_supervisor(api).await_wake(Interrupts()) == (code, None)
    assert ("POST", "goals/g/lease") not in api.calls


@pytest.mark.slow  # real processes or many examples: not in make test-quick
def test_a_child_that_ignores_ctrl_c_is_killed_after_the_grace(monkeypatch, tmp_path):
    import signal
    import sys
    import threading

    from wakeledger_agent import child

    monkeypatch.setattr(child, "INTERRUPT_GRACE", 0.5)
    marks = tmp_path / "marks"
    stubborn = ("import signal, sys, time\n"
                f"signal.signal(signal.SIGINT, lambda *a: open({str(marks)!r}, 'a').write('I'))\n"
                "print('started', flush=True)\ntime.sleep(30)\n")
    interrupts = Interrupts()
    # As the signal handler would be called on a Ctrl-C, once the child runs.
    threading.Timer(1.0, interrupts._handle, (signal.SIGINT, None)).start()
    ended = child.run([sys.executable, "-c", stubborn], {}, interrupts, None)
    assert (ended.signal, ended.returncode, ended.interrupted) == (9, 137, signal.SIGINT)
    assert marks.read_text() == "I"  # forwarded once, then killed
    assert ended.tail == "started"


def test_the_heartbeat_stops_for_good_only_when_the_lease_is_gone():
    import threading

    from wakeledger_agent.child import Heartbeat
    from wakeledger_agent.client import ApiError

    answers = [ApiError(9, "cannot reach", None, {"code": "unreachable"}), None,
               ApiError(6, "409 lease_lost", {"code": "lease_lost"}, {"code": "lease_lost"})]
    done = threading.Event()

    def beat():
        answer = answers.pop(0)
        if not answers:
            done.set()
        if answer is not None:
            raise answer

    heartbeat = Heartbeat(beat, 0.05, lambda error: code_of(error) in LEASE_GONE)
    heartbeat.start()
    assert done.wait(5)
    heartbeat.join(5)
    assert not heartbeat.is_alive() and heartbeat.beats == 1
    assert heartbeat.lost is not None and heartbeat.lost.code == "lease_lost"


# --------------------------------------------------------------- a command that falls silent


class Recording(Progress):
    """Progress whose `say` lines are kept with how many API calls preceded each."""

    def __init__(self, api):
        super().__init__(io.StringIO())
        self.api, self.said = api, []

    def say(self, text):
        self.said.append((text, len(self.api.calls)))


class RunApi:
    """The server as one run sees it: heartbeats, run reports, the goal's
    latest checkpoint (``seqs`` answers in turn, the last one repeated)."""

    def __init__(self, seqs=(3,)):
        self.seqs, self.calls = list(seqs), []

    def call(self, method, path, body=None):
        self.calls.append((method, path, body))
        if method == "GET":
            return {"last_checkpoint_seq": self.seqs.pop(0) if len(self.seqs) > 1
                    else self.seqs[0]}
        if path.endswith("/runs"):
            return {"status": "blocked", "reason": "UNCLASSIFIED", "paused_until": "",
                    "continuations": {"used": 0, "max": 3}}
        return {}

    def paths(self, since=0):
        return [(method, path) for method, path, _ in self.calls[since:]]


class NoLeases:
    def save(self, goal_id, lease): pass

    def forget(self, goal_id): pass

    def set_current(self, goal_id): pass


def running_supervisor(api, silent_limit):
    opts = Options(workspace="/w", goal_key="k", command=["agent"], silent_limit=silent_limit)
    supervisor = Supervisor(api, NoLeases(), opts, "http://x/api/v1", progress=Recording(api),
                            clock=lambda: NOW)
    supervisor.goal_id = "g"
    supervisor.lease_seconds = 1.5  # a heartbeat every second (its floor)
    supervisor.hold({"lease": {"token": "wll_x", "generation": 1}})
    return supervisor


def run_within(supervisor, argv, seconds):
    """run_once in a thread, with a deadline: a supervisor that never stops
    the child fails the test instead of hanging it."""
    import threading

    result = {}
    thread = threading.Thread(target=lambda: result.setdefault(
        "ended", supervisor.run_once(argv, Interrupts())), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"the run did not end within {seconds} s"
    return result["ended"]


@pytest.mark.slow  # real processes or many examples: not in make test-quick
def test_a_silent_child_is_stopped_its_lease_no_longer_renewed_and_reported_unclassified(
        monkeypatch, tmp_path):
    import sys

    from wakeledger_agent import child

    # Long enough that a heartbeat (every second) would land in it if they went on.
    monkeypatch.setattr(child, "SILENCE_GRACE", 1.5)
    marks = tmp_path / "marks"
    hung = ("import signal, time\n"
            f"signal.signal(signal.SIGTERM, lambda *a: open({str(marks)!r}, 'a').write('T'))\n"
            "print('started; secret sk-live-123', flush=True)\n"
            "while True: time.sleep(60)\n")  # hangs, and shrugs off SIGTERM
    api = RunApi()
    supervisor = running_supervisor(api, silent_limit=2)
    ended = run_within(supervisor, [sys.executable, "-c", hung], 30)

    assert (ended.silenced, ended.signal, ended.returncode) == (2, 9, 137)
    assert marks.read_text() == "T"  # SIGTERM first, SIGKILL after the grace
    (notice, calls_then), (reported, _) = supervisor.progress.said
    assert "no output (and no checkpoint) for 2 s" in notice
    assert "lease no longer renewed" in notice
    # Renewed while it ran; then one look for a checkpoint before judging it hung …
    assert ("POST", "goals/g/lease/heartbeat") in api.paths()[:calls_then]
    assert api.paths()[calls_then - 1] == ("GET", "goals/g")
    # … and from the notice on, not one renewal: only the report, which ends the lease.
    assert api.paths(calls_then) == [("POST", "goals/g/runs")]
    body = api.calls[-1][2]
    assert body == {"lease": {"token": "wll_x", "generation": 1}, "outcome": "error",
                    "error_text": "the agent produced no output for 2 s; supervise stopped it",
                    "retry_after": ""}
    assert classify(body["error_text"]) == UNCLASSIFIED
    assert "started" not in str(api.calls)  # its output never reaches the server
    assert "stopped after 2 s without output: unclassified; goal blocked" in reported
    assert supervisor.lease is None


@pytest.mark.slow  # real processes or many examples: not in make test-quick
def test_a_child_that_keeps_printing_is_not_stopped(tmp_path):
    import sys

    chatty = ("import time\n"
              "for n in range(12):\n    print('step', n, flush=True); time.sleep(0.3)\n")
    api = RunApi()
    supervisor = running_supervisor(api, silent_limit=2)  # 7x the gap between lines
    ended = run_within(supervisor, [sys.executable, "-c", chatty], 30)
    assert (ended.returncode, ended.silenced) == (0, None)
    assert ended.tail.endswith("step 11")
    # Never silent for the limit: the checkpoint mark taken at the start is the only look.
    assert api.paths().count(("GET", "goals/g")) == 1
    assert api.calls[-2][1:] == ("goals/g/runs", {"lease": {"token": "wll_x", "generation": 1},
                                                  "outcome": "ok"})
    assert api.paths()[-1] == ("POST", "goals/g/lease/release")


@pytest.mark.slow  # real processes or many examples: not in make test-quick
def test_a_child_that_prints_nothing_but_checkpoints_is_not_stopped(tmp_path):
    import sys

    quiet = "import time\ntime.sleep(3.5)\nprint('done', flush=True)\n"
    api = RunApi(seqs=range(3, 100))  # each look finds a newer checkpoint
    supervisor = running_supervisor(api, silent_limit=1)
    ended = run_within(supervisor, [sys.executable, "-c", quiet], 30)
    assert (ended.returncode, ended.silenced) == (0, None)
    assert api.paths().count(("GET", "goals/g")) >= 3  # the mark, then a look per second
    assert api.calls[-2][2]["outcome"] == "ok"


def test_a_silent_limit_of_zero_never_stops_a_child():
    from wakeledger_agent.child import Silence

    off = Silence(0, progressed=lambda: pytest.fail("no look for a checkpoint either"))
    off.last -= 10 ** 6  # silent for eleven days
    assert not off.due()
    on = Silence(60, progressed=lambda: False)
    on.last -= 61
    assert on.due()
    api = RunApi()
    supervisor = running_supervisor(api, silent_limit=0)
    assert supervisor.silence() is None and api.calls == []


def supervise_args(*extra):
    from wakeledger_agent import cli

    return cli.parser().parse_args(["supervise", "--workspace", "/w", "--goal-key", "k",
                                    *extra, "--", "agent", "--flag"])


@pytest.mark.parametrize(("flag", "env", "limit"), [
    (None, None, 1800), (None, "", 1800), (None, "120", 120), (None, " 0 ", 0),
    ("2", "120", 2), ("0", None, 0), ("1.5", None, 1.5), ("604800", None, 604800),
])
def test_the_silent_limit_comes_from_the_option_else_the_environment(monkeypatch, flag, env,
                                                                     limit):
    from wakeledger_agent.supervise import options

    if env is None:
        monkeypatch.delenv("WAKELEDGER_SILENT_LIMIT", raising=False)
    else:
        monkeypatch.setenv("WAKELEDGER_SILENT_LIMIT", env)
    opts = options(supervise_args(*(["--silent-limit", flag] if flag is not None else [])))
    assert opts.silent_limit == limit and opts.command == ["agent", "--flag"]


BAD_LIMITS = ["abc", "-1", "0.5", "1e3", "nan", "inf", "30m", "604801", "1_000"]


# An empty variable is an unset one (as WAKELEDGER_TIMEOUT's), an empty option is not.
@pytest.mark.parametrize(("where", "value"), [("option", ""), *(
    (where, value) for where in ("option", "environment") for value in BAD_LIMITS)])
def test_a_bad_silent_limit_is_a_usage_error_that_names_it(monkeypatch, capsys, value, where):
    from wakeledger_agent import cli
    from wakeledger_agent.errors import EXIT_USAGE

    monkeypatch.setenv("WAKELEDGER_SILENT_LIMIT", value if where == "environment" else "60")
    extra = ["--silent-limit", value] if where == "option" else []
    with pytest.raises(SystemExit) as stopped:
        cli.main(["supervise", "--workspace", "/w", "--goal-key", "k", *extra, "--", "agent"])
    assert stopped.value.code == EXIT_USAGE
    name = "--silent-limit" if where == "option" else "WAKELEDGER_SILENT_LIMIT"
    assert capsys.readouterr().err == (
        f"wakeledger: {name} must be a number of seconds: 0 (never) or 1 to 604800; "
        f"got {value!r}\n")


def test_supervise_help_explains_the_silent_limit(capsys):
    from wakeledger_agent import cli

    with pytest.raises(SystemExit) as stopped:
        cli.main(["supervise", "--help"])
    assert stopped.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--silent-limit SECONDS take the command for hung" in text
    assert "$WAKELEDGER_SILENT_LIMIT, else 1800" in text


@pytest.mark.parametrize("limit", [1, 2, 1.5, 401, 429, 529, 1800, 604800])
def test_the_silence_phrase_reads_back_as_an_unknown_failure(limit):
    from wakeledger_agent.runend import silent_phrase
    from wakeledger_agent.supervise import judge_silence

    assert classify(silent_phrase(limit)) == UNCLASSIFIED
    assert judge_silence(limit).error_class == UNCLASSIFIED

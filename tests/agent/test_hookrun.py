"""The one hook runner both agents' hooks share: it reads one event, runs its
handler with short calls, and never fails the agent's turn (exit 0, one line
on stderr that names an unexpected error's type, never its text)."""

import io
import json

import pytest

from wakeledger_agent import claude_hook, hookrun, openclaw_hook
from wakeledger_agent.errors import CliError


def run(source: str, handler, monkeypatch, **env: str) -> tuple[int, list[str]]:
    monkeypatch.setenv("WAKELEDGER_URL", "http://127.0.0.1:9/api/v1")
    monkeypatch.setenv("WAKELEDGER_TOKEN", "wl_test")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    lines: list[str] = []
    code = hookrun.run_hook(io.StringIO(source), what="one test event", name_field="event",
                            hook=lambda api, facts: (api, facts), handlers={"go": handler},
                            log=lines.append, goes_on="the test")
    return code, lines


def test_the_handler_gets_a_short_timeout_client_and_its_answer_is_printed(monkeypatch, capsys):
    seen = {}

    def handler(hook):
        seen["api"], seen["facts"] = hook
        return {"context": "hello"}

    assert run('{"event": "go", "x": 1}', handler, monkeypatch,
               WAKELEDGER_TIMEOUT="30", WAKELEDGER_HOOK_TIMEOUT="2") == (0, [])
    assert seen["facts"] == {"event": "go", "x": 1}
    assert seen["api"].timeout == 2.0  # the hook's own, not the CLI's 30 s
    assert json.loads(capsys.readouterr().out) == {"context": "hello"}


@pytest.mark.parametrize("source", ["", "not json", "[1, 2]", '"text"'])
def test_bad_input_is_one_line_and_exit_0(source, monkeypatch, capsys):
    assert run(source, lambda hook: pytest.fail("ran"), monkeypatch) == (
        0, ["expected one test event as JSON on stdin"])
    assert capsys.readouterr().out == ""


def test_an_event_with_no_handler_does_nothing(monkeypatch, capsys):
    assert run('{"event": "other"}', lambda hook: pytest.fail("ran"), monkeypatch) == (0, [])
    assert capsys.readouterr().out == ""


def test_errors_are_logged_and_never_fail_the_turn(monkeypatch, capsys):
    def refused(hook):
        raise CliError(4, "the token was refused")

    def broken(hook):
        raise RuntimeError("Bearer wl_secret leaked into a message")

    assert run('{"event": "go"}', refused, monkeypatch) == (0, ["the token was refused"])
    assert run('{"event": "go"}', broken, monkeypatch) == (
        0, ["unexpected RuntimeError; the test goes on without Wake Ledger"])
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("hook", [claude_hook, openclaw_hook])
def test_both_hooks_exit_0_on_bad_input(hook, capsys):
    assert hook.main(io.StringIO("{")) == 0
    assert "as JSON on stdin" in capsys.readouterr().err

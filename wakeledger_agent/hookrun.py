"""The one runner of an agent's hooks: short calls, and never an error in the turn.

Claude Code's hooks and the OpenClaw plugin's hook both read one event as
JSON on stdin, pick what to do by its name, and must never stand in the
session's way: every failure (no server, a bad token, bad input) is one line
on stderr and exit 0, and each API call has a short timeout whatever the
CLI's ``WAKELEDGER_TIMEOUT`` says (the agent waits on us).
"""

import json
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any, TextIO, TypeVar

from wakeledger_agent import client
from wakeledger_agent.client import ApiError, Client
from wakeledger_agent.errors import EXIT_USAGE, CliError
from wakeledger_agent.leases import FileLeases

H = TypeVar("H")
HOOK_TIMEOUT = "3"  # seconds per call; OpenClaw's plugin kills us at 4 s


def hook_client() -> Client:
    """The API client of a hook: ``WAKELEDGER_HOOK_TIMEOUT`` (3 s) per call."""
    env = {**os.environ,
           "WAKELEDGER_TIMEOUT": os.environ.get("WAKELEDGER_HOOK_TIMEOUT") or HOOK_TIMEOUT}
    return client.from_env(env)


def fenced(api: Client, leases: FileLeases, goal_id: str, path: str, body: dict[str, Any],
           lease: dict[str, Any], ending: tuple[str, ...]) -> dict[str, Any]:
    """A fenced call with the lease the hooks keep; a refusal in ``ending``
    (the lease can never work again) forgets it before the error goes on."""
    try:
        return api.call("POST", f"goals/{goal_id}/{path}", {"lease": lease, **body})
    except ApiError as error:
        if error.code in ending:
            leases.forget(goal_id)
        raise


def read_facts(source: TextIO, what: str) -> dict[str, Any]:
    """One JSON object from ``source``, or a usage error naming ``what``."""
    try:
        facts = json.loads(source.read() or "null")
    except (ValueError, UnicodeDecodeError):
        facts = None
    if not isinstance(facts, dict):
        raise CliError(EXIT_USAGE, f"expected {what} as JSON on stdin")
    return facts


def run_hook(source: TextIO | None, *, what: str, name_field: str,
             hook: Callable[[Client, dict[str, Any]], H],
             handlers: Mapping[str, Callable[[H], Any]],
             log: Callable[[str], None], goes_on: str) -> int:
    """Read the event, pick its handler by ``facts[name_field]``, run it on
    ``hook(client, facts)`` with a hook's client, print its JSON answer if
    any; exit 0 whatever happens. ``goes_on`` names what carries on without
    Wake Ledger when something unexpected breaks ("the session")."""
    try:
        facts = read_facts(source or sys.stdin, what)
        handler = handlers.get(str(facts.get(name_field)))
        if handler is None:
            return 0  # an event these hooks do not act on
        output = handler(hook(hook_client(), facts))
    except CliError as error:
        # The messages are the server's problem details and our own words:
        # never a token (the API never echoes one).
        log(str(error))
        return 0
    except Exception as error:  # never an error in the turn: say what (its type), exit 0
        log(f"unexpected {type(error).__name__}; {goes_on} goes on without Wake Ledger")
        return 0
    if output is not None:
        print(json.dumps(output))
    return 0

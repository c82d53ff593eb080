"""The agent's client (the `wakeledger` CLI's, the stdio MCP server's) treats
503 database_busy as retryable: the same call, its Idempotency-Key unchanged,
again after Retry-After; still busy after its retries, an exit code that
says "try again" (the one an unreachable server gets). Over real HTTP to a
live server whose SQLite file is write-locked by a second connection."""

import fcntl
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection

from tests.factories import kinds, start_goal
from wakeledger_agent.client import BUSY_RETRIES, ApiError, Client
from wakeledger_agent.errors import EXIT_NETWORK

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif("connection.vendor != 'sqlite'")]


@contextmanager
def locked(wait: float = 0.2) -> Iterator[sqlite3.Connection]:
    """SQLite's write lock and the writers' queue both held by others, the
    server's bound shortened to ``wait`` seconds (read per wait)."""
    options = connection.settings_dict["OPTIONS"]
    saved = options.get("timeout")
    options["timeout"] = wait
    fd = os.open(f"{connection.settings_dict['NAME']}-writers.lock", os.O_RDWR | os.O_CREAT,
                 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    locker = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None, timeout=0)
    locker.execute("BEGIN IMMEDIATE")
    try:
        yield locker
    finally:
        if locker.in_transaction:
            locker.rollback()
        locker.close()
        os.close(fd)
        options["timeout"] = saved


def test_a_busy_write_is_sent_again_with_its_key_and_recorded_once(live_server, agent):
    gid, lease = start_goal(agent)
    api = Client(f"{live_server.url}/api/v1", agent.token)
    body = {"lease": lease, "current_step": "retrying", "progress_pct": 20}
    waits: list[float] = []
    with locked() as locker:
        def sleep(seconds: float) -> None:
            waits.append(seconds)
            locker.rollback()  # the other writer ends while the client waits

        api.sleep = sleep
        api.call("POST", f"goals/{gid}/checkpoints", body)
    assert waits == [5.0]  # Retry-After: WAKELEDGER_DB_WAIT_SECONDS
    assert kinds(gid).count("checkpoint.recorded") == 1


def test_still_busy_after_its_retries_it_exits_as_retryable(live_server, agent):
    gid, lease = start_goal(agent)
    api = Client(f"{live_server.url}/api/v1", agent.token)
    waits: list[float] = []
    api.sleep = waits.append
    with locked(), pytest.raises(ApiError) as raised:
        api.call("POST", f"goals/{gid}/checkpoints",
                 {"lease": lease, "current_step": "x", "progress_pct": 1})
    assert raised.value.code == "database_busy"
    assert raised.value.exit_code == EXIT_NETWORK
    assert len(waits) == BUSY_RETRIES
    assert "checkpoint.recorded" not in kinds(gid)


def test_an_mcp_tool_answered_database_busy_says_to_call_it_again(live_server, agent):
    """The hosted /mcp calls the API in-process (no client retries): its tool
    error keeps the problem and tells the agent to call again, and when."""
    from wakeledger_agent.leases import MemoryLeases
    from wakeledger_agent.mcp_calls import ToolCalls

    gid, lease = start_goal(agent)
    api = Client(f"{live_server.url}/api/v1", agent.token)
    api.sleep = lambda seconds: None

    def request(method: str, path: str, body: dict | None) -> object:
        return api.call(method, path, body)

    leases = MemoryLeases()
    leases.save(gid, lease)
    with locked():
        result = ToolCalls(request, leases).call(
            "checkpoint_goal", {"goal_id": gid, "current_step": "x", "progress_pct": 1})
    assert result.is_error
    assert result.structured_content["code"] == "database_busy"
    assert "call this tool again" in result.content[0].text

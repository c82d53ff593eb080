"""Temporary: supervise on api/cli.py's functions until the agent client home lands."""

import argparse
import os
import sys
from typing import Any

from api import cli
from wakeledger_agent import supervise


class Api:
    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return cli.call(method, path, body)


class Leases:
    def save(self, goal_id: str, lease: dict[str, Any]) -> None:
        cli.save_lease(goal_id, lease)

    def forget(self, goal_id: str) -> None:
        cli.forget_lease(goal_id)

    def set_current(self, goal_id: str) -> None:
        cli._write_private(cli.state_dir() / "current", goal_id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="wakeledger supervise")
    supervise.add_arguments(parser)
    args = parser.parse_args(argv)
    base = cli.api_base(os.environ.get("WAKELEDGER_URL", ""))
    return supervise.run_command(args, Api(), Leases(), base)


if __name__ == "__main__":
    sys.exit(main())

"""Exit codes, one per error class, and the error that carries one."""

from typing import Any

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_VALIDATION = 3
EXIT_AUTH = 4
EXIT_NOT_FOUND = 5
EXIT_LEASE_LOST = 6
EXIT_TERMINAL = 7
EXIT_CONFLICT = 8  # another conflict, or the lease (or a wake's claim) was not granted
EXIT_NETWORK = 9
EXIT_SERVER = 10
EXIT_INTERRUPTED = 130  # Ctrl-C, as shells report it


class CliError(Exception):
    """What the CLI prints on stderr, the exit code it ends with, and the JSON
    body (if any) it still prints on stdout."""

    def __init__(self, exit_code: int, message: str, body: Any = None):
        super().__init__(message)
        self.exit_code = exit_code
        self.body = body

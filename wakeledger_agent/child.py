"""One run of a supervised agent command: the process, its output's last lines
(in memory only), the lease's heartbeat while it runs, and Ctrl-C.

Standard library only. Nothing here writes the child's output anywhere but to
the supervisor's own stdout and stderr (the terminal or pipe the user gave
it): the tail that is classified lives in a bounded deque and dies with the
run.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO, Any

TAIL_LINES = 200  # provider limit notices are the last few lines; 200 is plenty
LINE_LIMIT = 2000  # characters kept of one line (a minified JSON body can be huge)
INTERRUPT_GRACE = 10.0  # seconds a child has to stop after a forwarded Ctrl-C

# Terminal colours and cursor moves: "usage\x1b[1m limit" must still read as words.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")


class Tail:
    """The last ``TAIL_LINES`` lines two streams wrote, interleaved as they came."""

    def __init__(self, lines: int = TAIL_LINES):
        self._lines: deque[str] = deque(maxlen=lines)
        self._lock = threading.Lock()

    def add(self, raw: bytes) -> None:
        line = _ANSI.sub("", raw.decode("utf-8", errors="replace")).rstrip("\r\n")
        with self._lock:
            self._lines.append(line[-LINE_LIMIT:])

    def text(self) -> str:
        with self._lock:
            return "\n".join(self._lines)


def pump(source: IO[bytes], sink: IO[bytes] | None, tail: Tail) -> None:
    """Copy a child's stream to ours as it comes (a progress bar without a
    newline still shows) and keep its complete lines in the tail."""
    pending = b""
    while chunk := source.read1(65536):  # type: ignore[attr-defined]
        if sink is not None:
            try:
                sink.write(chunk)
                sink.flush()
            except (OSError, ValueError):
                sink = None  # our reader went away: keep draining, or the child blocks
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            tail.add(line)
        if len(pending) > 4 * LINE_LIMIT:  # one endless line: keep its end only
            pending = pending[-LINE_LIMIT:]
    if pending:
        tail.add(pending)


class Heartbeat(threading.Thread):
    """Renews the lease every ``interval`` seconds while the child runs. Stops
    for good when the lease is gone (the child released it, finished the
    goal, or another holder took it): renewing it again cannot help."""

    def __init__(self, beat: Callable[[], None], interval: float,
                 gone: Callable[[Exception], bool]):
        super().__init__(name="wakeledger-heartbeat", daemon=True)
        self._beat, self._interval, self._gone = beat, interval, gone
        self._halt = threading.Event()
        self.beats = 0
        self.lost: Exception | None = None

    def run(self) -> None:
        while not self._halt.wait(self._interval):
            try:
                self._beat()
                self.beats += 1
            except Exception as error:  # a network blip: try again next interval
                if self._gone(error):
                    self.lost = error
                    return

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)


@dataclass
class Ended:
    """How a run ended. ``returncode`` is the shell's convention: 128 + N for
    a child killed by signal N."""

    returncode: int
    signal: int | None
    tail: str
    interrupted: int | None  # the signal the supervisor itself received, if any


class Interrupts:
    """SIGINT and SIGTERM to the supervisor while a child runs: forwarded to
    the child's process group once, remembered, and the child given
    ``INTERRUPT_GRACE`` seconds before it is killed. The child has its own
    process group, so a Ctrl-C on the terminal reaches it only through us
    (once, not twice: a second SIGINT makes many agent CLIs quit hard)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.received: int | None = None
        self.event = threading.Event()
        self._child: subprocess.Popen[bytes] | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Interrupts:
        for signum in self.SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def watch(self, child: subprocess.Popen[bytes] | None) -> None:
        self._child = child

    def _handle(self, signum: int, _frame: object) -> None:
        first = self.received is None
        self.received = self.received or signum
        self.event.set()
        if first and self._child is not None and self._child.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._child.pid, signum)


def _stdin() -> int | IO[Any]:
    """The child's stdin: ours when it is a pipe or a file (`echo prompt |
    wakeledger supervise -- codex exec -`), /dev/null on a terminal. The child
    runs in its own process group, where reading the terminal would stop it
    (SIGTTIN) and hang the run: supervised agents run non-interactively."""
    try:
        return subprocess.DEVNULL if os.isatty(sys.stdin.fileno()) else sys.stdin
    except (OSError, ValueError):
        return subprocess.DEVNULL


def _sink(stream: IO[str]) -> IO[bytes] | None:
    return getattr(stream, "buffer", None)


def run(argv: list[str], env: Mapping[str, str], interrupts: Interrupts,
        heartbeat: Heartbeat | None) -> Ended:
    """Run ``argv`` to its end, its output passed through and its tail kept."""
    tail = Tail()
    if interrupts.received:  # a Ctrl-C before the start: start nothing
        return Ended(128 + interrupts.received, None, "", interrupts.received)
    try:
        child = subprocess.Popen(argv, env=dict(env), stdin=_stdin(),  # noqa: S603
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 process_group=0)
    except OSError as error:
        # Nothing started: the command's own failure, reported like a crash.
        tail.add(f"cannot start {argv[0]}: {error.strerror}".encode())
        return Ended(127, None, tail.text(), interrupts.received)
    interrupts.watch(child)
    pumps = [threading.Thread(target=pump, args=(stream, _sink(ours), tail), daemon=True)
             for stream, ours in ((child.stdout, sys.stdout), (child.stderr, sys.stderr))]
    for thread in pumps:
        thread.start()
    if heartbeat is not None:
        heartbeat.start()
    try:
        _wait(child, interrupts)
    finally:
        interrupts.watch(None)
        if heartbeat is not None:
            heartbeat.stop()
    for thread in pumps:
        thread.join(timeout=5)  # a grandchild holding the pipe open must not hang us
    code = child.returncode
    killed = -code if code < 0 else None
    return Ended(128 + killed if killed else code, killed, tail.text(), interrupts.received)


def _wait(child: subprocess.Popen[bytes], interrupts: Interrupts) -> None:
    """Wait for the child; after a forwarded interrupt, at most the grace."""
    deadline: float | None = None
    while True:
        try:
            child.wait(timeout=0.2)
            return
        except subprocess.TimeoutExpired:
            pass
        if interrupts.received is None:
            continue
        if deadline is None:
            deadline = time.monotonic() + INTERRUPT_GRACE
        elif time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)

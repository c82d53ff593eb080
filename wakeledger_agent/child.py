"""One run of a supervised agent command: the process, its output's last lines
(in memory only), the lease's heartbeat while it runs, Ctrl-C, and a child
that falls silent past a limit.

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
SILENCE_GRACE = 10.0  # seconds a silent child has to stop after our SIGTERM

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


class Silence:
    """How long the child may go without writing a byte to stdout or stderr
    before it is taken for hung (``limit`` seconds; 0: never). ``progressed``
    is asked once the limit is reached, for a sign of life the output does not
    show (a checkpoint recorded through the server): when it answers True the
    clock starts again."""

    def __init__(self, limit: float, progressed: Callable[[], bool] = lambda: False):
        self.limit = limit
        self.progressed = progressed
        self.last = time.monotonic()
        self.stopped = False  # set once the child was stopped for its silence
        self.quiet_until = 0.0  # monotonic: the child said it waits (silent) until then

    def waits_until(self, seconds: float) -> None:
        """The child said it waits this long for its provider, silent: its
        silence counts from the end of that wait, not from now."""
        self.quiet_until = max(self.quiet_until, time.monotonic() + seconds)

    def heard(self) -> None:
        # A float assignment is atomic under the GIL: the pumps call this
        # from their threads, the waiting loop only reads it.
        self.last = time.monotonic()

    def due(self) -> bool:
        """True when the child has been silent past the limit, with no other
        sign of life: time to stop it."""
        if not self.limit or self.stopped or \
                time.monotonic() - max(self.last, self.quiet_until) < self.limit:
            return False
        if self.progressed():
            self.heard()
            return False
        return True


def pump(source: IO[bytes], sink: IO[bytes] | None, tail: Tail,
         silence: Silence | None = None,
         on_line: Callable[[str], None] | None = None) -> None:
    """Copy a child's stream to ours as it comes (a progress bar without a
    newline still shows) and keep its complete lines in the tail. Any bytes,
    a partial line too, count as a sign of life. ``on_line`` is shown each
    complete line (a host's provider wait is read from them); what it raises
    is its own business, never the pump's."""
    pending = b""
    while chunk := source.read1(65536):  # type: ignore[attr-defined]
        if silence is not None:
            silence.heard()
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
            if on_line is not None:
                with contextlib.suppress(Exception):
                    on_line(line[:2 * LINE_LIMIT].decode("utf-8", errors="replace"))
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
        self._busy = threading.Lock()  # held while one renewal is under way
        self.beats = 0
        self.lost: Exception | None = None

    def run(self) -> None:
        while not self._halt.wait(self._interval):
            with self._busy:
                if self._halt.is_set():  # halted while we woke: not one more
                    return
                try:
                    self._beat()
                    self.beats += 1
                except Exception as error:  # a network blip: try again next interval
                    if self._gone(error):
                        self.lost = error
                        return

    def halt(self) -> None:
        """No renewal after this returns: one under way is waited for (at most
        the client's timeout), none starts again. For a child taken for hung,
        whose lease must stop looking alive from the moment we say so."""
        self._halt.set()
        with self._busy:
            pass

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
    silenced: float | None = None  # the silence limit it was stopped for, if it was


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
        heartbeat: Heartbeat | None, silence: Silence | None = None,
        on_silence: Callable[[], None] = lambda: None,
        on_line: Callable[[str], None] | None = None) -> Ended:
    """Run ``argv`` to its end, its output passed through and its tail kept.
    With ``silence``, a child silent past its limit is stopped (see _wait)
    and ``on_silence`` called once the heartbeat has stopped."""
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
    if silence is not None:
        silence.heard()  # the silence counts from the start, not from our construction
    pumps = [threading.Thread(target=pump, args=(stream, _sink(ours), tail, silence, reader),
                              daemon=True)
             for stream, ours, reader in ((child.stdout, sys.stdout, on_line),
                                          (child.stderr, sys.stderr, None))]
    for thread in pumps:
        thread.start()
    if heartbeat is not None:
        heartbeat.start()
    try:
        _wait(child, interrupts, silence, lambda: _silenced(child, heartbeat, on_silence))
    finally:
        interrupts.watch(None)
        if heartbeat is not None:
            heartbeat.stop()
    for thread in pumps:
        thread.join(timeout=5)  # a grandchild holding the pipe open must not hang us
    code = child.returncode
    killed = -code if code < 0 else None
    silenced = silence.limit if silence is not None and silence.stopped else None
    return Ended(128 + killed if killed else code, killed, tail.text(), interrupts.received,
                 silenced)


def _silenced(child: subprocess.Popen[bytes], heartbeat: Heartbeat | None,
              on_silence: Callable[[], None]) -> None:
    """Stop a child taken for hung: the lease first (a hung run must not keep
    the goal looking alive a moment longer), then the word, then SIGTERM to
    its whole process group (an agent's tools run as its children)."""
    if heartbeat is not None:
        heartbeat.halt()
    on_silence()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGTERM)


def _wait(child: subprocess.Popen[bytes], interrupts: Interrupts,
          silence: Silence | None = None, stop: Callable[[], None] = lambda: None) -> None:
    """Wait for the child; after a forwarded interrupt, or once ``stop`` was
    called for its silence, at most that grace before SIGKILL."""
    deadline: float | None = None
    while True:
        try:
            child.wait(timeout=0.2)
            return
        except subprocess.TimeoutExpired:
            pass
        if deadline is None and silence is not None and interrupts.received is None \
                and silence.due():
            silence.stopped = True
            stop()
            deadline = time.monotonic() + SILENCE_GRACE
            continue
        if interrupts.received is None and deadline is None:
            continue
        if deadline is None:
            deadline = time.monotonic() + INTERRUPT_GRACE
        elif time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)

"""A dependency-free progress bar for long operator commands (replay, verify).

On a terminal it redraws one line; elsewhere (CI logs, pipes, cron mail) it
prints nothing: the commands end with a summary line of their own, and a log
has no use for a bar.
"""

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, total: int, label: str, stream: TextIO | None = None,
                 *, width: int = 30):
        self.total = max(total, 0)
        self.label = label
        self.stream = stream or sys.stderr
        self.width = width
        self.done = 0
        self.started = time.monotonic()
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._drawn = -1  # the last percentage drawn

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self.total == 0 or not self._tty:
            return
        fraction = min(self.done / self.total, 1.0)
        percent = int(fraction * 100)
        if percent == self._drawn:
            return  # a redraw per percent, not per goal: 100k goals, 100 writes
        self._drawn = percent
        filled = int(fraction * self.width)
        bar = "█" * filled + "·" * (self.width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total} {self._rate()}")
        self.stream.flush()

    def close(self) -> None:
        if self._tty and self.total:
            self.stream.write("\n")
            self.stream.flush()

    def _rate(self) -> str:
        elapsed = time.monotonic() - self.started
        return f"{self.done / elapsed:,.0f}/s" if elapsed > 0 else ""

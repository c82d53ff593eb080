"""A dependency-free progress bar for long operator commands (replay, verify).

On a terminal it redraws one line; elsewhere (CI logs, pipes) it prints a line
at every tenth of the work so logs stay short.
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
        self._last_decile = -1

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self.total == 0:
            return
        fraction = min(self.done / self.total, 1.0)
        if self._tty:
            filled = int(fraction * self.width)
            bar = "█" * filled + "·" * (self.width - filled)
            self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total} "
                              f"{self._rate()}")
            self.stream.flush()
        else:
            decile = int(fraction * 10)
            if decile != self._last_decile and self.total >= 100:
                self._last_decile = decile
                self.stream.write(f"{self.label}: {self.done}/{self.total} "
                                  f"({decile * 10}%) {self._rate()}\n")

    def close(self) -> None:
        if self._tty and self.total:
            self.stream.write("\n")
            self.stream.flush()

    def _rate(self) -> str:
        elapsed = time.monotonic() - self.started
        return f"{self.done / elapsed:,.0f}/s" if elapsed > 0 else ""

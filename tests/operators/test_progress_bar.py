"""The terminal progress bar of long commands (ledger/progress.py): silent off a
terminal, one redrawn line on one."""

import io

from ledger.operators.progress import Progress


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_prints_nothing_off_a_terminal():
    out = io.StringIO()  # a pipe, a CI log, cron mail
    bar = Progress(1000, "replay", out)
    for _ in range(1000):
        bar.advance()
    bar.close()
    assert out.getvalue() == ""


def test_progress_redraws_one_line_on_a_terminal():
    out = FakeTTY()
    bar = Progress(4, "verify", out, width=4)
    for _ in range(4):
        bar.advance()
    bar.close()
    assert out.getvalue().count("\r") == 4
    assert "verify [████] 4/4" in out.getvalue()
    assert out.getvalue().endswith("\n")

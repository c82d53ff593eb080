"""Runs the shell examples of a Markdown page as written and compares what
they print with what the page shows (docs/doc-tests.md: the conventions).

A page's fenced ``console`` blocks are transcripts: a ``$ `` line is a
command (a line ending in ``\\`` continues it), the lines after it, up to the
next command, what it prints (stdout and stderr, as a terminal shows them). A
``sh`` block is commands only: each must exit 0. A block is preceded by an
HTML comment to run it otherwise (invisible when the page is rendered):

- ``<!-- doc-test: skip -->``: not run (``git clone``: the test has a clone);
- ``<!-- doc-test: server -->``: the block is ``make run``'s, started once by
  the test; its lines must each appear in the server's output (in any order:
  the processes write at once);
- ``<!-- doc-test: server-log -->``: lines the server prints later (a wake);
  each is waited for, up to ``wait`` seconds;
- ``<!-- doc-test: exit N -->``: the block's commands exit N (default 0; a
  command the page follows with ``$ echo $?`` exits with what that prints).

Placeholders in what a page shows, so that one run's ids, times and secrets
match another's:

- ``…`` stands for any text within a line; a line of ``…`` alone for any
  number of lines;
- a word cut short with ``…`` (``wl_auqP0FkM_…``, ``z8YrRDRJ…``) is a secret
  printed once: any word matches, and the same cut word in a later command is
  the whole value (a cut word whose output the page does not show is the
  last printed word that begins alike, up to its first ``_``);
- ids (UUIDs, and the 8 hex digits that begin one) match any id, the same id
  the same id throughout the page;
- times (``2026-12-02T16:25:34.024585Z``, ``2026-12-02 16:24:33``,
  ``12-02 16:34:33``, ``16:24:29``, ``(pid 5054)``, a pid in brackets ending a
  line, relative ``now`` /
  ``9m ago``) match any time of their form;
- runs of spaces compare as one (a table's columns widen with a longer path);
- the test's stand-ins (its port for the page's, its scratch folder for the
  page's) are replaced in commands and in what the page shows alike.

Every command runs in a fresh ``bash`` that starts where the previous one
ended: the same folder, the exported variables, and ``$?``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ELLIPSIS = "…"
DIRECTIVE = re.compile(r"<!--\s*doc-test:\s*(.+?)\s*-->")
FENCE = re.compile(r"^```(\w*)\s*$")

# What a page shows → the regular expression an actual value must match.
# Order matters: the first alternative that matches at a position wins.
SHAPES: list[tuple[str, str, str]] = [  # (name, in the page, in the output)
    ("cut", r"[\w.+-]+…", r"\S+"),
    ("uuid", r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
     r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
    ("iso", r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?",
     r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?"),
    ("datetime", r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d+)?(?: [+-]\d{4})?",
     r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d+)?(?: [+-]\d{4})?"),
    ("short", r"\b\d\d-\d\d \d\d:\d\d(?::\d\d)?\b", r"\d\d-\d\d \d\d:\d\d(?::\d\d)?"),
    ("clock", r"\b\d\d:\d\d:\d\d\b", r"\d\d:\d\d:\d\d"),
    ("pid", r"\bpid \d+", r"pid \d+"),
    ("pidend", r"\(\d+\)$", r"\(\d+\)"),  # gunicorn's "Listening at: … (5054)"
    ("ago", r"\b(?:now|\d+[smhd] ago)\b", r"(?:now|\d+[smhd] ago)"),
    # The 8 hex digits `ledger goals` prints: a word of hex with a letter and a digit.
    ("hex8", r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{8}\b", r"[0-9a-f]{8}"),
    ("ellipsis", r"…", r".*?"),
    ("space", r"\s+", r"\s+"),
]
PAGE = re.compile("|".join(f"(?P<{name}>{page})" for name, page, _ in SHAPES))
BOUND = {"cut", "uuid", "hex8"}  # the same page value is the same actual value


@dataclass
class Block:
    lang: str
    lines: list[str]
    line: int  # where its first line is in the page (1-based)
    directive: str = ""


@dataclass
class Step:
    command: str
    shown: list[str]
    line: int


def blocks(path: Path) -> list[Block]:
    found: list[Block] = []
    current: Block | None = None
    directive = ""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if current is None:
            fence = FENCE.match(line)
            if fence:
                current = Block(fence.group(1), [], number + 1, directive)
            elif DIRECTIVE.search(line):
                directive = DIRECTIVE.search(line).group(1)
            elif line.strip():
                directive = ""
        elif line.startswith("```"):
            found.append(current)
            current, directive = None, ""
        else:
            current.lines.append(line)
    return found


def steps(block: Block) -> list[Step]:
    """The commands of a block and what each prints."""
    result: list[Step] = []
    lines = iter(enumerate(block.lines, block.line))
    for number, line in lines:
        prompt = block.lang == "console" and line.startswith("$ ")
        if block.lang == "console" and not prompt:
            if result:
                result[-1].shown.append(line)
            continue
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        command = line[2:] if prompt else line
        while command.rstrip().endswith("\\"):
            command += "\n" + next(lines)[1]
        result.append(Step(command, [], number))
    return result


@dataclass
class Page:
    """One page's run: its bindings, stand-ins and shell state."""

    path: Path
    home: Path
    cwd: Path
    env: dict[str, str]
    stand_ins: dict[str, str] = field(default_factory=dict)
    bound: dict[str, str] = field(default_factory=dict)
    printed: list[str] = field(default_factory=list)
    rc: int = 0
    timeout: float = 120.0

    def __post_init__(self) -> None:
        self.state = self.home / f".doc-test-{self.path.stem}"
        self.state.mkdir(parents=True, exist_ok=True)
        (self.state / "env").write_text("")
        (self.state / "cwd").write_text(str(self.cwd))

    # ------------------------------------------------------------- commands

    def stand_in(self, text: str) -> str:
        for page, ours in self.stand_ins.items():
            text = text.replace(page, ours)
        return text

    def command(self, text: str) -> str:
        """The command as the test runs it: stand-ins and cut secrets filled in."""
        text = self.stand_in(text)

        def whole(match: re.Match[str]) -> str:
            cut = match.group(0)
            if cut in self.bound:
                return self.bound[cut]
            visible = cut[:-1]
            stem = visible[:visible.index("_") + 1] if "_" in visible else visible
            for output in reversed(self.printed):
                words = re.findall(rf"(?<!\S){re.escape(stem)}\S*", output)
                if words:
                    return words[-1]
            raise AssertionError(f"{self.where(0)}: nothing printed before stands for {cut!r}")

        text = re.sub(r"[\w.+-]+…", whole, text)
        for page, ours in self.bound.items():  # an id the page printed earlier
            if not page.endswith(ELLIPSIS):
                text = re.sub(rf"(?<![\w-]){re.escape(page)}(?![\w-])", ours, text)
        return text

    def run(self, text: str, line: int) -> tuple[int, str]:
        command = self.command(text)
        script = (f'set -a; . {shlex.quote(str(self.state / "env"))}; set +a\n'
                  f'cd "$(cat {shlex.quote(str(self.state / "cwd"))})"\n'
                  f"(exit {self.rc})\n{command}\n"
                  f'__rc=$?; export -p > {shlex.quote(str(self.state / "env"))}; '
                  f'pwd > {shlex.quote(str(self.state / "cwd"))}; exit $__rc\n')
        try:
            done = subprocess.run(["bash", "-c", script], env=self.env, cwd=self.cwd,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired as error:
            raise AssertionError(f"{self.where(line)}: `{text}` ran over {self.timeout:g} s"
                                 ) from error
        self.rc = done.returncode
        self.printed.append(done.stdout)
        return done.returncode, done.stdout

    def where(self, line: int) -> str:
        return f"{self.path.name}:{line}"

    # ------------------------------------------------------------- matching

    def pattern(self, shown: str, bound: dict[str, str]) -> tuple[re.Pattern[str], list[str]]:
        """A shown line as a regular expression; the page values it binds."""
        parts, names = [], []
        shown = self.stand_in(shown).rstrip()
        position = 0
        for match in PAGE.finditer(shown):
            parts.append(re.escape(shown[position:match.start()]))
            position = match.end()
            kind = match.lastgroup or ""
            value = match.group(0)
            regex = dict((name, ours) for name, _, ours in SHAPES)[kind]
            if kind in BOUND and value in bound:
                parts.append(re.escape(bound[value]))
            elif kind in BOUND:
                parts.append(f"({regex})")
                names.append(value)
            else:
                parts.append(regex)
        parts.append(re.escape(shown[position:]))
        return re.compile(r"\s*" + "".join(parts) + r"\s*"), names

    def line_matches(self, shown: str, actual: str, bound: dict[str, str]) -> bool:
        pattern, names = self.pattern(shown, bound)
        match = pattern.fullmatch(actual)
        if not match:
            return False
        for value, ours in zip(names, match.groups(), strict=True):
            bound[value] = ours
            if len(value) == 36 and value.count("-") == 4:  # a UUID: its 8-digit prefix too
                bound.setdefault(value[:8], ours[:8])
        return True

    def lines_match(self, shown: list[str], actual: list[str],
                    bound: dict[str, str]) -> dict[str, str] | None:
        """The bindings under which ``actual`` is what ``shown`` shows, else None."""
        if not shown:
            return bound if not actual else None
        if shown[0].strip() == ELLIPSIS:
            for skip in range(len(actual) + 1):
                found = self.lines_match(shown[1:], actual[skip:], dict(bound))
                if found is not None:
                    return found
            return None
        if not actual:
            return None
        trial = dict(bound)
        if self.line_matches(shown[0], actual[0], trial):
            return self.lines_match(shown[1:], actual[1:], trial)
        return None

    def check(self, step: Step, rc: int, output: str, exit_code: int = 0) -> None:
        actual = [line.rstrip() for line in output.splitlines()]
        shown = [line.rstrip() for line in step.shown]
        while shown and not shown[-1]:
            shown.pop()
        if rc != exit_code and step.command.strip() != "echo $?":
            raise AssertionError(f"{self.where(step.line)}: `{step.command}` exited {rc} "
                                 f"(the page expects {exit_code}):\n{output}")
        if not step.shown and exit_code == 0:
            return
        found = self.lines_match(shown, actual, dict(self.bound))
        if found is None:
            raise AssertionError(
                f"{self.where(step.line)}: `{step.command}` printed what the page does not "
                f"show.\n--- the page shows:\n" + "\n".join(shown)
                + "\n--- it printed:\n" + "\n".join(actual))
        self.bound = found

    def await_lines(self, shown: list[str], output: Callable[[], str], line: int,
                    wait: float) -> None:
        """Each shown line (ellipsis lines aside) appears in ``output()``, in any order."""
        pending = [s for s in shown if s.strip() and s.strip() != ELLIPSIS]
        deadline = time.monotonic() + wait
        while True:
            lines = [x.rstrip() for x in output().splitlines()]
            for shown_line in list(pending):
                for actual in lines:
                    trial = dict(self.bound)
                    if self.line_matches(shown_line, actual, trial):
                        self.bound = trial
                        pending.remove(shown_line)
                        break
            if not pending:
                return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.where(line)}: in {wait:g} s the server printed no line like:\n"
                    + "\n".join(pending) + "\n--- the last lines it printed:\n"
                    + "\n".join(output().splitlines()[-30:]))
            time.sleep(1)


def run_page(page: Page, *, server_output: Callable[[], str] | None = None,
             wait: float = 240.0, only: Callable[[Block], bool] = lambda b: True) -> int:
    """Every runnable block of the page, in order; returns how many commands
    ran. A difference does not stop the run: every one is told at the end."""
    ran, differences = 0, []
    for block in blocks(page.path):
        if block.lang not in ("console", "sh") or not only(block):
            continue
        directive = block.directive
        if directive == "skip":
            continue
        if directive in ("server", "server-log"):
            assert server_output is not None, f"{page.where(block.line)}: no server to read"
            shown = [line for line in block.lines if not line.startswith("$ ")]
            # The server is up when the run begins: its start-up lines are there.
            try:
                page.await_lines(shown, server_output, block.line,
                                 wait if directive == "server-log" else 60)
            except AssertionError as difference:
                differences.append(str(difference))
            continue
        exit_code = int(directive.split()[1]) if directive.startswith("exit ") else 0
        listed = steps(block)
        for number, step in enumerate(listed):
            rc, output = page.run(step.command, step.line)
            # A command the page follows with `echo $?` exits with what that prints.
            after = listed[number + 1] if number + 1 < len(listed) else None
            expected = (int(after.shown[0]) if after and after.command.strip() == "echo $?"
                        and after.shown and after.shown[0].strip().isdigit() else exit_code)
            try:
                page.check(step, rc, output, expected)
            except AssertionError as difference:
                differences.append(str(difference))
            ran += 1
    assert not differences, "\n\n".join(differences)
    return ran


def shell_environment(home: Path, **extra: str) -> dict[str, str]:
    """A reader's shell: no virtualenv on PATH (the pages put it there), no
    setting of the test suite's, a home of its own."""
    drop = ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "SECRET_KEY", "MAKEFLAGS", "MAKELEVEL",
            "MFLAGS", "VIRTUAL_ENV", "PYTHONPATH")
    env = {key: value for key, value in os.environ.items()
           if key not in drop and not key.startswith(("WAKELEDGER_", "PYTEST_"))}
    env["PATH"] = os.pathsep.join(part for part in env.get("PATH", "").split(os.pathsep)
                                  if "/.venv/" not in part + "/")
    return {**env, "HOME": str(home), **extra}

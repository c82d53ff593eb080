"""`make run`: refuse a busy port, set up, then keep the Procfile's processes up.

``python -m ledger.project.run --port 8000`` (the Makefile's ``run``). In order:

1. the port is checked **before anything else**: a second `make run` on a busy
   port says so in one line and exits 2, without migrating, printing an admin
   URL or starting a second scheduler against the same database;
2. ``migrate``, ``collectstatic`` and ``ledger bootstrap`` (the first admin);
3. each line of the Procfile (``web``: gunicorn, ``scheduler``: ``manage.py
   scheduler``, ``watch``: ``ledger notify --every``) is started in a session
   of its own, and a child that dies is restarted after a backoff (1 s,
   doubling to 30 s; back to 1 s once it ran a minute) with a line saying so.
   The others keep running: honcho, which ran
   this before, stopped everything when one process died and restarted nothing.
4. SIGINT / SIGTERM: one SIGTERM to each child (never to its group: the
   scheduler's launcher turns it into one clean stop of the cluster, see
   scheduling/management/commands/scheduler.py), a wait of up to ``--grace``
   seconds, then SIGKILL to what is left. A second signal kills at once.

No Django: the port check must come before any setting is read (reading
them creates var/ and the SQLite file). Its own lines are log lines in the
format every process writes (WAKELEDGER_LOG_FORMAT, ledger/project/jsonlogs.py),
under the logger ``run``; with JSON logs the set-up's output (migrate's list,
the first admin's password) becomes JSON lines too.
"""

import argparse
import contextlib
import ctypes
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
BUSY_EXIT = 2
FIRST_BACKOFF, MAX_BACKOFF = 1.0, 30.0
# A child that ran this long before dying is restarted after the first backoff again.
STEADY_SECONDS = 60.0
PR_SET_PDEATHSIG = 1
BAD_ADDRESS = "not an address"


LOG = logging.getLogger("run")


def log_format() -> str:
    """WAKELEDGER_LOG_FORMAT as the children read it; a wrong value is theirs
    to refuse (in one paragraph, at migrate), these lines stay text."""
    form = os.environ.get("WAKELEDGER_LOG_FORMAT", "text")
    return form if form in ("text", "json") else "text"


def start_logging(form: str) -> None:
    from ledger.project.jsonlogs import formatter  # this checkout's, no Django
    from ledger.project.logfilters import AccessLogFields  # "-" as the request id

    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(formatter(form))
    handler.addFilter(AccessLogFields())
    LOG.addHandler(handler)
    LOG.setLevel(logging.INFO)
    LOG.propagate = False


def say(line: str, level: int = logging.INFO) -> None:
    LOG.log(level, line)
    for handler in LOG.handlers:
        handler.flush()


def port_busy(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be served (None: it can). SO_REUSEADDR as
    gunicorn sets it: a port left in TIME_WAIT is free, a listener is not."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]"), port))
        except socket.gaierror:
            return BAD_ADDRESS
        except OSError as error:
            return error.strerror or str(error)
    return None


def port_number(value: str) -> int:
    """--port, or $PORT (argparse reads the default through this too)."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if not 1 <= number <= 65535:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a port number; give PORT (make run PORT=8123) or --port a "
            "whole number from 1 to 65535")
    return number


def procfile(path: Path) -> dict[str, str]:
    """``name: command`` lines, in order (blank lines and comments skipped)."""
    entries: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, command = line.partition(":")
            entries[name.strip()] = command.strip()
    return entries


def _with_parent() -> None:
    """In each child, before exec: if this supervisor is killed without
    passing a signal on, the kernel sends the child SIGTERM (Linux's
    parent-death signal), so nothing runs on unsupervised."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class Child:
    name: str
    command: str
    process: subprocess.Popen | None = None
    started: float = 0.0
    backoff: float = FIRST_BACKOFF
    restart_at: float | None = None
    restarts: int = 0
    env: dict[str, str] = field(default_factory=dict)

    def start(self) -> None:
        # The shell expands the Procfile's ${VAR:-default}; exec leaves the
        # real program as our direct child, so its pid is the one we signal.
        self.process = subprocess.Popen(  # noqa: S603 (our Procfile's own lines)
            ["/bin/sh", "-c", f"exec {self.command}"], cwd=ROOT, env=self.env,
            start_new_session=True, preexec_fn=_with_parent)
        self.started = time.monotonic()
        self.restart_at = None
        say(f"{self.name} started (pid {self.process.pid})")

    def reap(self) -> None:
        """The child died: say how, clear its group, plan its restart."""
        assert self.process is not None
        code = self.process.returncode
        how = f"signal {-code}" if code < 0 else f"exit code {code}"
        # Its strays (gunicorn's workers, a shell's children) go with it: an
        # orphan still holding the port would keep the restart from binding.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        if time.monotonic() - self.started >= STEADY_SECONDS:
            self.backoff = FIRST_BACKOFF
        self.restarts += 1
        self.restart_at = time.monotonic() + self.backoff
        say(f"{self.name} (pid {self.process.pid}) died ({how}); restarting it in "
            f"{self.backoff:g} s (restart {self.restarts})", logging.WARNING)
        self.backoff = min(self.backoff * 2, MAX_BACKOFF)
        self.process = None


def setup(python: str, env: dict[str, str], form: str = "text") -> None:
    """Migrate, collect static files, bootstrap: stop at the first failure."""
    for args in (["migrate", "--noinput"], ["collectstatic", "--noinput", "--verbosity", "0"],
                 ["ledger", "bootstrap"]):
        command = [python, "manage.py", *args]
        if form == "json":
            step = args[1] if args[0] == "ledger" else args[0]  # migrate, bootstrap
            code = _as_json_lines(command, env, f"run.{step}")
        else:
            code = subprocess.run(command, cwd=ROOT, env=env, check=False).returncode  # noqa: S603
        if code:
            say(f"manage.py {' '.join(args)} failed (exit code {code}); nothing was started",
                logging.ERROR)
            sys.exit(code)


def _as_json_lines(command: list[str], env: dict[str, str], name: str) -> int:
    """Run a set-up command; each plain line it prints is logged as a JSON line
    under ``name`` (its own JSON lines, Django's logging, pass as they are)."""
    logger = logging.getLogger(name)  # under "run": its handler, its format
    with subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,  # noqa: S603
                          stderr=subprocess.STDOUT, text=True) as process:
        assert process.stdout is not None
        for line in process.stdout:
            line = line.rstrip("\n")
            if line.startswith("{") and _is_json(line):
                print(line, flush=True)
            elif line.strip():
                logger.info(line.strip())
                for handler in LOG.handlers:
                    handler.flush()
    return process.returncode


def _is_json(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def supervise(children: list[Child], grace: float) -> int:
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(signum))
    signal.signal(signal.SIGINT, lambda signum, frame: stop.append(signum))
    for child in children:
        child.start()
    while not stop:
        now = time.monotonic()
        for child in children:
            if child.process is not None and child.process.poll() is not None:
                child.reap()
            elif child.process is None and child.restart_at is not None \
                    and now >= child.restart_at and not stop:
                child.start()
                say(f"{child.name} restarted (restart {child.restarts})")
        time.sleep(0.2)
    return shutdown(children, grace, stop)


def shutdown(children: list[Child], grace: float, stop: list[int]) -> int:
    running = [child for child in children if child.process is not None]
    say(f"stopping {', '.join(child.name for child in running) or 'nothing'} "
        f"(signal {stop[0]}; up to {grace:g} s)")
    asked = len(stop)
    for child in running:
        assert child.process is not None
        with contextlib.suppress(ProcessLookupError):
            child.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(child.process.poll() is None for child in running if child.process):
        if time.monotonic() >= deadline or len(stop) > asked:
            say("killing what is left", logging.WARNING)
            break
        time.sleep(0.1)
    for child in running:
        assert child.process is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.process.pid, signal.SIGKILL)
        child.process.wait()
    say("stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ledger.project.run",
        description="Serve Wake Ledger (the web, the scheduler and the notification "
                    "watch), restarting any that dies. Refuses a busy port before it "
                    "touches the database.")
    parser.add_argument("--port", type=port_number, default=os.environ.get("PORT", "8000"),
                        help="the port gunicorn serves (default: $PORT, else 8000)")
    parser.add_argument("--procfile", type=Path, default=ROOT / "Procfile",
                        help="the processes to run, one `name: command` line each")
    parser.add_argument("--grace", type=float, default=90.0,
                        help="seconds a stop waits for the children before killing them "
                             "(longer than the scheduler's own: task timeout + 10)")
    parser.add_argument("--no-setup", action="store_true",
                        help="skip migrate, collectstatic and bootstrap")
    options = parser.parse_args(argv)
    form = log_format()
    start_logging(form)
    host = os.environ.get("WAKELEDGER_BIND", "127.0.0.1")
    busy = port_busy(host, options.port)
    if busy == BAD_ADDRESS:
        print(f"make run: WAKELEDGER_BIND={host!r} is not an address this machine can "
              "serve; set it to one of its addresses (127.0.0.1 when unset, 0.0.0.0 for "
              "all); nothing was migrated or started", file=sys.stderr, flush=True)
        return BUSY_EXIT
    if busy:
        print(f"make run: port {options.port} on {host} is busy ({busy}): another "
              f"server runs there; nothing was migrated or started (try PORT=...)",
              file=sys.stderr, flush=True)
        return BUSY_EXIT
    env = {**os.environ, "PORT": str(options.port), "WAKELEDGER_PORT": str(options.port),
           # The children's own `python` and `gunicorn` are this interpreter's.
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    if not options.no_setup:
        setup(sys.executable, env, form)
    children = [Child(name, command, env=env)
                for name, command in procfile(options.procfile).items()]
    return supervise(children, options.grace)


if __name__ == "__main__":
    sys.exit(main())

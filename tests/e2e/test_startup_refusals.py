"""A refused setting stops start-up with one paragraph naming the setting and
what to do, and no traceback unless asked for (ledger/project/refusal.py):
`manage.py` (every command, make run's set-up, the scheduler, the watch),
gunicorn, and make run's own port and address."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from ledger.project.refusal import EXIT_CODE

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # real processes, two seconds each


@pytest.fixture(autouse=True)
def _once():
    if connection.vendor != "sqlite":
        pytest.skip("processes that read settings only: run once, in the SQLite half")


def run(tmp_path: Path, argv: list[str], **extra: str) -> subprocess.CompletedProcess:
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHONPATH": str(ROOT),
           "WAKELEDGER_VAR_DIR": str(tmp_path), "HOME": str(tmp_path), **extra}
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def refused(done: subprocess.CompletedProcess, program: str, setting: str) -> list[str]:
    assert done.returncode == EXIT_CODE, done.stderr
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout
    lines = done.stderr.strip().splitlines()
    first = f"{program}: a setting was refused, so nothing was started."
    assert first in lines, lines
    # The paragraph ends the output; before it, at most gunicorn's own log line.
    lines = lines[lines.index(first):]
    assert len(lines) == 3, lines
    assert setting in lines[1]
    assert lines[2].startswith(f"  Correct {setting} (docs/configuration.md")
    return lines


BAD = {
    "WAKELEDGER_NOTIFY": ('["nope://x"]', "is not an Apprise URL"),
    "WAKELEDGER_DISPATCHERS": ('{"a": {"type": "x"}}', ".type must be one of"),
    "WAKELEDGER_PORT": ("eighty", "is not a whole number"),
    "WAKELEDGER_METRICS_TOKEN": ("short", "at least 32 characters"),
    "WAKELEDGER_SIGNING_KEY_FILE": ("", "is not an unencrypted PEM private key"),
}


@pytest.mark.parametrize("setting", sorted(BAD))
def test_a_refused_setting_is_one_paragraph_naming_it(tmp_path, setting):
    value, why = BAD[setting]
    if setting == "WAKELEDGER_SIGNING_KEY_FILE":  # read when a head is signed
        (tmp_path / "garbage.pem").write_text("not a key\n")
        value, argv = str(tmp_path / "garbage.pem"), ["ledger", "key"]
    else:
        argv = ["check"]
    done = run(tmp_path, [sys.executable, "manage.py", *argv], **{setting: value})
    lines = refused(done, f"manage.py {argv[0]}", setting)
    assert why in lines[1]


def test_the_traceback_is_there_when_asked_for(tmp_path):
    bad = {"WAKELEDGER_NOTIFY": '["nope://x"]'}
    asked = run(tmp_path, [sys.executable, "manage.py", "check", "--traceback"], **bad)
    assert asked.returncode != 0 and "Traceback" in asked.stderr
    assert "ImproperlyConfigured: WAKELEDGER_NOTIFY entry 1" in asked.stderr
    debug = run(tmp_path, [sys.executable, "manage.py", "check"], WAKELEDGER_TRACEBACK="1",
                **bad)
    assert "Traceback" in debug.stderr


def test_with_json_logs_the_refusal_is_one_json_line(tmp_path):
    done = run(tmp_path, [sys.executable, "manage.py", "check"],
               WAKELEDGER_NOTIFY='["nope://x"]', WAKELEDGER_LOG_FORMAT="json")
    assert done.returncode == EXIT_CODE
    [line] = done.stderr.strip().splitlines()
    record = json.loads(line)
    assert record["level"] == "CRITICAL" and record["request_id"] == "-"
    assert "WAKELEDGER_NOTIFY entry 1" in record["message"]


def test_make_run_stops_at_set_up_with_the_paragraph(tmp_path):
    done = run(tmp_path, [sys.executable, "-m", "ledger.project.run", "--port", "8799"],
               WAKELEDGER_NOTIFY='["nope://x"]')
    assert done.returncode == EXIT_CODE
    assert "Traceback" not in done.stdout + done.stderr
    assert "manage.py migrate: a setting was refused" in done.stderr
    assert f"manage.py migrate --noinput failed (exit code {EXIT_CODE}); nothing was " \
           "started" in done.stdout
    assert "started (pid" not in done.stdout


@pytest.mark.slow
def test_gunicorn_stops_with_the_paragraph_before_any_worker(tmp_path):
    done = run(tmp_path, [sys.executable, "-m", "gunicorn", "-c",
                          "python:ledger.project.gunicorn_conf", "ledger.project.wsgi",
                          "--bind", "127.0.0.1:0"], WAKELEDGER_NOTIFY='["nope://x"]')
    refused(done, "gunicorn", "WAKELEDGER_NOTIFY")
    assert "Booting worker" not in done.stderr + done.stdout


@pytest.mark.parametrize(("extra", "said"), [
    ({"PORT": "eighty"}, "'eighty' is not a port number; give PORT"),
    ({"PORT": "70000"}, "'70000' is not a port number"),
    ({"WAKELEDGER_BIND": "no-such-host.invalid"},
     "WAKELEDGER_BIND='no-such-host.invalid' is not an address this machine can serve"),
])
def test_make_run_refuses_a_bad_port_or_address_in_one_line(tmp_path, extra, said):
    done = run(tmp_path, [sys.executable, "-m", "ledger.project.run", "--no-setup"], **extra)
    assert done.returncode == 2
    assert said in done.stderr and "Traceback" not in done.stderr
    assert not os.listdir(tmp_path)  # nothing was set up

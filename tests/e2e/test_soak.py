"""A minute of the soak (bench/soak.py) in the PostgreSQL half of `make test`:
two gunicorn instances, two schedulers, 50 simulated agents over real HTTP,
then the exactly-once and integrity checks. `make soak` runs it for 5 minutes.

It starts its own throwaway PostgreSQL and processes (nothing of the test's
database is used); the database half is the one with PostgreSQL binaries."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_a_minute_of_soak_keeps_every_promise():
    if connection.vendor != "postgresql":
        pytest.skip("the soak runs in the PostgreSQL half of the suite")
    done = subprocess.run(
        [sys.executable, "bench/soak.py"], cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "SOAK_SECONDS": "60"}, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-4000:]
    assert "soak passed" in done.stdout
    assert "FAIL" not in done.stdout

"""Settings come from the environment through strict readers."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from ledger.project.env import database_from_url, env_bool, env_int, env_list


@pytest.mark.parametrize("raw, expected", [("1", True), ("yes", True), ("ON", True),
                                           ("0", False), ("false", False), ("", False)])
def test_env_bool(monkeypatch, raw, expected):
    monkeypatch.setenv("X_FLAG", raw)
    assert env_bool("X_FLAG") is expected


def test_env_bool_rejects_anything_else(monkeypatch):
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="X_FLAG='maybe' is not a boolean"):
        env_bool("X_FLAG")


def test_env_int(monkeypatch):
    assert env_int("X_MISSING", 7) == 7
    monkeypatch.setenv("X_NUM", " 42 ")
    assert env_int("X_NUM", 0) == 42
    monkeypatch.setenv("X_NUM", "4.2")
    with pytest.raises(ImproperlyConfigured, match="not a whole number"):
        env_int("X_NUM", 0)
    monkeypatch.setenv("X_NUM", "-1")
    with pytest.raises(ImproperlyConfigured, match="below the minimum 0"):
        env_int("X_NUM", 0, minimum=0)


def test_env_list(monkeypatch):
    monkeypatch.setenv("X_LIST", "a.example, b.example,,")
    assert env_list("X_LIST", []) == ["a.example", "b.example"]


def test_database_url():
    config = database_from_url("postgresql://led%40ger:s3cr%2Ft@db.internal:6543/wake?sslmode=require")
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert (config["USER"], config["PASSWORD"], config["HOST"], config["PORT"], config["NAME"]) \
        == ("led@ger", "s3cr/t", "db.internal", "6543", "wake")
    assert config["OPTIONS"] == {"sslmode": "require"}


@pytest.mark.parametrize("url, message", [
    ("mysql://u@h/db", "must start with postgres://"),
    ("postgres://u@h/", "names no database"),
    ("postgres://u@h:notaport/db", "invalid port"),
])
def test_database_url_rejects_bad_values(url, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        database_from_url(url)


def test_bad_settings_fail_at_start_up(tmp_path):
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={"DJANGO_SETTINGS_MODULE": "ledger.project.settings", "WAKELEDGER_CONN_MAX_AGE": "ten",
             "WAKELEDGER_VAR_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=False,
    )
    assert result.returncode != 0
    assert "WAKELEDGER_CONN_MAX_AGE='ten' is not a whole number" in result.stderr


@pytest.mark.parametrize(("name", "value", "message"), [
    ("WAKELEDGER_WITNESS_KEYS", "not-a-key", "a note verifier key is name+hash+key"),
    ("WAKELEDGER_LOG_ORIGIN", "has space", "is not a note key name"),
    ("WAKELEDGER_TLOG_WITNESSES", "ftp://w.example k", "WAKELEDGER_TLOG_WITNESSES: 'ftp://"),
    ("WAKELEDGER_TLOG_WITNESSES", "https://w.example", "a note verifier key is name+hash"),
])
def test_bad_log_note_settings_fail_at_start_up(tmp_path, name, value, message):
    import subprocess
    import sys
    from pathlib import Path

    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={"DJANGO_SETTINGS_MODULE": "ledger.project.settings", name: value,
             "WAKELEDGER_VAR_DIR": str(tmp_path), "PATH": "/usr/bin:/bin",
             "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        capture_output=True, text=True, check=False,
    )
    assert result.returncode != 0
    assert message in result.stderr and "ImproperlyConfigured" in result.stderr

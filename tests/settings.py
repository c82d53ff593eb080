"""Settings for the test suite: the project's own, plus what tests need.

Environment defaults are set before ledger.project.settings is imported, because it
reads them at import time.
"""

import os

# Django empties the database between transactional tests with `flush`, which
# the append-only triggers otherwise refuse (see ledger/management/commands/flush.py).
os.environ.setdefault("WAKELEDGER_ALLOW_FLUSH", "1")
# The suite's processes take their dispatchers from the variable alone (each
# test its own), never from one var/dispatchers.json they would all share.
os.environ.setdefault("WAKELEDGER_DISPATCHERS_FILE", "")

from ledger.project.settings import *  # noqa: F403

# Hashing passwords at full strength only slows the suite down.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):  # noqa: F405
    import tempfile

    # A file, not Django's default in-memory database: the shared-cache
    # in-memory mode answers concurrent writers with "table is locked" instead
    # of waiting, so it cannot show how the real WAL + IMMEDIATE setup behaves.
    DATABASES["default"]["TEST"] = {  # noqa: F405
        "NAME": os.path.join(tempfile.gettempdir(), f"wakeledger-test-{os.getpid()}.sqlite3"),
    }

# The head-signing key (ledger/log/signing.py) of this test process, never the
# repository's var/ key.
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

WAKELEDGER_SIGNING_KEY_FILE = Path(tempfile.gettempdir()) / (
    f"wakeledger-test-signing-{os.getpid()}.pem")
# The sealer's record outside the database (ledger/log/sealer_state.py): each
# test's database is thrown away, so a shared record would cry "rollback" in
# the next test; tests that keep one set their own (tests/conftest.py).
WAKELEDGER_SEALER_STATE_FILE = "off"

"""A scheduler process for the crash tests: runs one task against the test
database with fail points enabled, so WAKELEDGER_FAILPOINT can kill it
(SIGKILL) at a named point. Usage: python -m tests.crash_child
fire GOAL_ID INTENDED KIND | sweep | replay-fix | post PATH JSON TOKEN KEY (an API
request served in this process, as a web worker would)."""

import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

from django.conf import settings

if os.environ.get("WAKELEDGER_TEST_SQLITE"):
    # The parent's test database file (its name carries the parent's pid).
    settings.DATABASES["default"]["NAME"] = os.environ["WAKELEDGER_TEST_SQLITE"]
settings.WAKELEDGER_FAILPOINTS_ENABLED = True

import django  # noqa: E402

django.setup()

from scheduling import tasks  # noqa: E402

if sys.argv[1] == "fire":
    print(tasks.fire_watchdog(sys.argv[2], intended_date=sys.argv[3], kind=sys.argv[4]))
elif sys.argv[1] == "replay-fix":
    from ledger.eventstore import projection

    print(len(list(projection.replay(projection.goal_ids(), fix=True))))
elif sys.argv[1] == "post":
    from django.test import Client

    path, body, token, key = sys.argv[2:6]
    answer = Client().post(path, body, content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_IDEMPOTENCY_KEY=key,
                           HTTP_HOST="127.0.0.1")
    print(answer.status_code)
else:
    print(tasks.sweep_leases())

"""Log levels that mean something: an alarm is an alarm.

Django logs every 4xx response at WARNING on ``django.request`` ("Conflict:
/api/v1/goals/…"). For this service most are the protocol working as
designed — a fenced call with a lost lease (409), a retried Idempotency-Key
still in flight (409), a bad token (401) — and several agents racing produce
them by the hundred. They go out at INFO; 5xx stay at ERROR. Abuse is still
visible at WARNING from ``wakeledger.security`` (throttling, lockouts).
"""

import logging


class ClientErrorsAreInfo(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500 and record.levelno == logging.WARNING:
            record.levelno, record.levelname = logging.INFO, "INFO"
        elif status == 503 and record.levelno == logging.ERROR:
            # 503 is only ever database_busy: a condition of the database (a
            # lock held past WAKELEDGER_DB_WAIT_SECONDS), not a failure of the
            # server, and its client retries. A warning, one per refused call.
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True

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
        return True


# django-q2's lines an operator reads at INFO: the cluster starting, running,
# stopping, stopped. Its routine (each task enqueued, created from a schedule,
# processing, processed; each process ready, guarding, stopping) would be
# eight lines a minute on an idle server, the sweeper's and the sealer's.
_CLUSTER_LIFE = "Q Cluster "


class SchedulerChatterIsDebug(logging.Filter):
    """On the ``django-q`` logger: its routine INFO lines become DEBUG (shown
    only at WAKELEDGER_LOG_LEVEL=DEBUG); warnings and errors stay as they are."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a broken record is the handler's to report
            return True
        if message.startswith(_CLUSTER_LIFE):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


class OneLineWarning(logging.Filter):
    """A refusal that is the client's doing, not the server's fault (a request
    for a Host the site does not serve): a WARNING on one line, without the
    traceback Django attaches."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.WARNING:
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


# Gunicorn's access atoms a JSON line carries as fields of their own.
_ACCESS_FIELDS = {"h": "remote", "m": "method", "U": "path", "s": "status",
                  "B": "bytes", "L": "duration_s", "a": "user_agent"}


class AccessLogFields(logging.Filter):
    """On gunicorn's handlers: an access line's request id (the response's
    X-Request-ID, the id of the app's lines for that request) as the record's
    ``request_id``, and its method, path, status, size and duration as fields
    of a JSON line; an error line's request id is "-". The atoms are already
    redacted (gunicorn_conf.RedactingLogger.atoms)."""

    def filter(self, record: logging.LogRecord) -> bool:
        atoms = record.args if isinstance(record.args, dict) else None
        if atoms is None or record.name != "gunicorn.access":
            if not getattr(record, "request_id", ""):
                record.request_id = "-"
            return True
        record.request_id = str(atoms.get("{x-request-id}o") or "-")
        for atom, name in _ACCESS_FIELDS.items():
            if atom in atoms:
                setattr(record, name, _number(atoms[atom]) if atom in "sBL" else atoms[atom])
        return True


def _number(value: object) -> object:
    try:
        return float(str(value)) if "." in str(value) else int(str(value))
    except ValueError:  # gunicorn's "-" for a size it does not know
        return value

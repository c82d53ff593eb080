"""Gunicorn's configuration (the Procfile and the systemd unit use it:
``gunicorn -c python:ledger.project.gunicorn_conf ledger.project.wsgi``).

Command-line options given after it win, so the bind address, the worker
count and the access log stay in the Procfile.
"""

import os

from gunicorn.glogging import Logger

from ledger.project import jsonlogs
from ledger.project.logfilters import AccessLogFields
from ledger.project.redact import RedactSecrets, gunicorn_atoms


def _log_format() -> str:
    # Read as logconfig.log_format reads it, without Django: a wrong value is
    # refused by the app's settings, in the worker, with the paragraph
    # (ledger/project/refusal.py); until then gunicorn's lines are text.
    form = os.environ.get("WAKELEDGER_LOG_FORMAT", "text")
    return form if form in jsonlogs.FORMATS else "text"


class RedactingLogger(Logger):
    """The access log never shows a token (see ledger/project/redact.py), and
    gunicorn's lines are in the app's format: with WAKELEDGER_LOG_FORMAT=json
    one JSON object a line with the app's fields, else the app's text line."""

    def atoms(self, resp, req, environ, request_time):  # type: ignore[no-untyped-def]
        return gunicorn_atoms(super().atoms(resp, req, environ, request_time))

    def setup(self, cfg):  # type: ignore[no-untyped-def]
        super().setup(cfg)
        form = _log_format()
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                handler.setFormatter(jsonlogs.formatter(form))
                for kind in (AccessLogFields, RedactSecrets):
                    if not any(isinstance(each, kind) for each in handler.filters):
                        handler.addFilter(kind())


logger_class = RedactingLogger
# The common log format without the referer (an admin page's referer is
# harmless, but a client's may carry anything), the time and the request id:
# the line's own fields carry both (the request id is the response's
# X-Request-ID, the id of the app's lines for that request).
access_log_format = '%(h)s %(l)s %(u)s "%(r)s" %(s)s %(b)s %(L)ss %(p)s "%(a)s"'

# Gunicorn >= 25 opens a control socket at one per-user path
# ($XDG_RUNTIME_DIR/gunicorn.ctl): two instances on one host would share it,
# and gunicornc would talk to whichever bound last. Each instance gets its own
# under var/ named after its port, or WAKELEDGER_GUNICORN_CONTROL_SOCKET
# (empty to disable).
# The checkout's var/ (this file is ledger/project/gunicorn_conf.py).
_var = os.environ.get("WAKELEDGER_VAR_DIR") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "var")
_socket = os.environ.get("WAKELEDGER_GUNICORN_CONTROL_SOCKET",
                         os.path.join(_var, f"gunicorn-{os.environ.get('PORT', '8000')}.ctl"))
if _socket and len(_socket.encode()) < 100:  # AF_UNIX paths are at most 107 bytes
    control_socket = _socket
else:
    control_socket_disable = True


def on_starting(server):  # type: ignore[no-untyped-def]
    """Read the settings once in the master, before any worker: a refused one
    stops gunicorn with its one paragraph (ledger/project/refusal.py), instead
    of each worker failing to boot with a traceback."""
    from django.core.exceptions import ImproperlyConfigured

    from ledger.project import refusal

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ledger.project.settings")
    try:
        import django

        django.setup()
    except ImproperlyConfigured as error:
        if refusal.wanted():
            raise
        refusal.refuse(error, "gunicorn")

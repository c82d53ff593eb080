"""Gunicorn's configuration (the Procfile and the systemd unit use it:
``gunicorn -c python:ledger.project.gunicorn_conf ledger.project.wsgi``).

Command-line options given after it win, so the bind address, the worker
count and the access log stay in the Procfile.
"""

import os

from gunicorn.glogging import Logger

from ledger.project.redact import gunicorn_atoms


class RedactingLogger(Logger):
    """The access log never shows a token (see ledger/project/redact.py)."""

    def atoms(self, resp, req, environ, request_time):  # type: ignore[no-untyped-def]
        return gunicorn_atoms(super().atoms(resp, req, environ, request_time))


logger_class = RedactingLogger
# The common log format without the referer: an admin page's referer is
# harmless, but a client's may carry anything. Last, the request id the
# response carries (ledger/project/requestid.py): the id of the app's lines.
access_log_format = ('%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s %(L)ss %(p)s "%(a)s" '
                     '%({x-request-id}o)s')

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

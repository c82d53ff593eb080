"""The one HTTP client of the REST API: the base URL, the token, a call, and
what an error answer means (an exit code for the CLI, a problem for MCP).

Standard library only. Every POST and DELETE carries a fresh Idempotency-Key,
which is what makes the one retry after a network error safe: the server
replays the first answer instead of acting twice.
"""

import json
import os
import stat
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from wakeledger_agent.errors import (
    EXIT_AUTH,
    EXIT_CONFLICT,
    EXIT_LEASE_LOST,
    EXIT_NETWORK,
    EXIT_NOT_FOUND,
    EXIT_SERVER,
    EXIT_TERMINAL,
    EXIT_USAGE,
    EXIT_VALIDATION,
    CliError,
)
from wakeledger_agent.leases import state_dir

API_PATH = "/api/v1"
DEFAULT_TIMEOUT = 30.0
# 503 database_busy: the server could not write within its bound and recorded
# nothing, so the same call (its Idempotency-Key unchanged) is sent again
# after Retry-After, this many times more, each wait at most BUSY_WAIT_CAP s.
BUSY = "database_busy"
BUSY_RETRIES = 3
BUSY_WAIT_CAP = 10.0

_BY_CODE = {
    "lease_lost": EXIT_LEASE_LOST,
    "lease_required": EXIT_LEASE_LOST,
    "goal_terminal": EXIT_TERMINAL,
    "unauthenticated": EXIT_AUTH,
    "forbidden": EXIT_AUTH,
    "not_found": EXIT_NOT_FOUND,
    # Retryable, as an unreachable server is: nothing was recorded.
    BUSY: EXIT_NETWORK,
}
_BY_STATUS = {400: EXIT_VALIDATION, 401: EXIT_AUTH, 403: EXIT_AUTH, 404: EXIT_NOT_FOUND,
              409: EXIT_CONFLICT, 413: EXIT_VALIDATION, 415: EXIT_VALIDATION,
              422: EXIT_VALIDATION}


class ApiError(CliError):
    """An error answer from the API (or none at all): the CLI's exit code and
    message, and the RFC 9457 problem the MCP server hands on."""

    def __init__(self, exit_code: int, message: str, body: Any, problem: dict[str, Any]):
        super().__init__(exit_code, message, body)
        self.problem = problem

    @property
    def code(self) -> str:
        return str(self.problem.get("code", ""))


def api_base(url: str) -> str:
    """The API's base URL from WAKELEDGER_URL: a server root (or any URL whose
    path does not end with /api/v1, such as a reverse proxy's prefix) gets
    /api/v1 added, the mistake that otherwise answers every call 404."""
    base = url.strip().rstrip("/")
    if not urllib.parse.urlsplit(base).path.endswith(API_PATH):
        base += API_PATH
    return base


class Client:
    """Blocking calls to the REST API."""

    def __init__(self, base: str, token: str, timeout: float = DEFAULT_TIMEOUT):
        self.base, self.token, self.timeout = base, token, timeout
        self.sleep: Callable[[float], None] = time.sleep  # the busy retries' waits

    def call(self, method: str, path: str, body: dict[str, Any] | None = None,
             query: dict[str, Any] | None = None, *, auth: bool = True,
             raw: bool = False) -> Any:
        headers = {"Accept": "application/json"}
        if auth:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if method in ("POST", "DELETE"):
            data = json.dumps(body or {}).encode()
            headers["Content-Type"] = "application/json"
            # One key per logical call: the retry below is then safe.
            headers["Idempotency-Key"] = str(uuid.uuid4())
        url = f"{self.base}/{path}"
        if query:
            url += "?" + urllib.parse.urlencode(
                {k: v for k, v in query.items() if v is not None}, doseq=True)
        last_error: Exception | None = None
        network, busy = 2, BUSY_RETRIES + 1
        while network and busy:
            # from_env() admitted only http(s): never file: or ftp:.
            request = urllib.request.Request(url, data=data,  # noqa: S310
                                             headers=headers, method=method)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as answer:  # noqa: S310
                    content = answer.read()
                    return content.decode() if raw else json.loads(content or b"null")
            except urllib.error.HTTPError as error:
                wait = error.headers.get("Retry-After", "") if error.code == 503 else ""
                failure = http_error(error, self.base)
                busy -= 1
                if failure.code != BUSY or not busy:
                    raise failure from None
                self.sleep(_seconds(wait))
            except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
                last_error = error
                network -= 1
        detail = f"cannot reach {self.base}: {last_error}"
        raise ApiError(EXIT_NETWORK, detail, None, {"code": "unreachable", "detail": detail})


def from_env(environ: Mapping[str, str] | None = None, *,
             missing_token: int = EXIT_AUTH) -> Client:
    """The client WAKELEDGER_URL, WAKELEDGER_TOKEN and WAKELEDGER_TIMEOUT describe,
    or a CliError that says which one to fix."""
    env = os.environ if environ is None else environ
    given = env.get("WAKELEDGER_URL", "")
    token = env.get("WAKELEDGER_TOKEN", "").strip() or _saved_token()
    if not given.strip().startswith(("http://", "https://")):
        raise CliError(EXIT_USAGE, "set WAKELEDGER_URL to the server's http(s) URL "
                       "(e.g. http://127.0.0.1:8000/api/v1)")
    if not token:
        raise CliError(missing_token, "set WAKELEDGER_TOKEN to your API token")
    if token.lower().startswith("bearer "):
        token = token[len("bearer "):].strip()  # the header's prefix is ours to add
    try:
        timeout = float(env.get("WAKELEDGER_TIMEOUT") or DEFAULT_TIMEOUT)
    except ValueError:
        timeout = 0
    if not 0 < timeout <= 600:
        raise CliError(EXIT_USAGE, "WAKELEDGER_TIMEOUT must be a number of seconds "
                       "(0 < t <= 600)")
    return Client(api_base(given), token, timeout)


def _saved_token() -> str:
    """The token in ``<state dir>/token`` (0600), for the programs that cannot
    be handed WAKELEDGER_TOKEN: a command dispatcher passes no WAKELEDGER_*
    variable of the server's, so the resumed agent's hooks read it here."""
    path = state_dir() / "token"
    try:
        mode = path.stat().st_mode
    except OSError:
        return ""
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise CliError(EXIT_AUTH, f"{path} is readable by others; `chmod 600 {path}` "
                       "(or set WAKELEDGER_TOKEN)")
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def http_error(error: urllib.error.HTTPError, base: str) -> ApiError:
    try:
        body = json.loads(error.read() or b"null")
    except ValueError:
        body = None
    code = body.get("code") if isinstance(body, dict) else None
    problem = body if code else {
        "code": "server_error" if error.code >= 500 else "http_error",
        "detail": f"HTTP {error.code} {error.reason} from {error.url}", "status": error.code}
    if error.code == 404 and code is None:
        # Not one of our problems: the URL reaches something that is not the API.
        return ApiError(EXIT_NOT_FOUND, f"404 from {error.url}: no Wake Ledger API there; "
                        f"check WAKELEDGER_URL (the API is at {base}, e.g. "
                        "http://127.0.0.1:8000/api/v1)", body, problem)
    exit_code = _BY_CODE.get(code) or _BY_STATUS.get(error.code)
    if exit_code is None:
        exit_code = EXIT_SERVER if error.code >= 500 else EXIT_VALIDATION
    detail = body.get("detail") if isinstance(body, dict) else error.reason
    errors = body.get("errors") if isinstance(body, dict) else None
    if isinstance(errors, dict):
        detail = f"{detail} " + _field_errors(errors, detail)
    return ApiError(exit_code, f"{error.code} {code or ''}: {detail}".strip(), body, problem)


def _seconds(retry_after: str) -> float:
    """Retry-After's delay in seconds (a number; a date or nothing: one
    second), at most BUSY_WAIT_CAP."""
    try:
        wait = float(retry_after)
    except ValueError:
        wait = 1.0
    return min(max(wait, 0.0), BUSY_WAIT_CAP)


def _field_errors(errors: dict[str, Any], detail: Any) -> str:
    """"see errors" is on stdout in the JSON; a human reads stderr. A domain
    refusal repeats its detail as its field's error: name the field then, not
    the sentence twice."""
    parts = []
    for field, problems in errors.items():
        texts = [str(p) for p in (problems if isinstance(problems, list) else [problems])
                 if str(p) != detail]
        parts.append(f"{field}: {' '.join(texts)}" if texts else f"(field: {field})")
    return "; ".join(parts)

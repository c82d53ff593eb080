"""Dispatchers: what a granted internal wake does with its continuation.

Configured by operators in WAKELEDGER_DISPATCHERS (JSON), never by agents; a
goal only names one (``policy.dispatch``). The whole configuration is checked
at start-up (ImproperlyConfigured), never at the first wake. Types:

- ``webhook``: POST the resume packet and the new lease as JSON to ``url``
  (``https``, or ``http`` to a loopback host or with ``"allow_http": true``),
  signed ``X-Wakeledger-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of
  "<t>." + body>`` with ``secret`` (scheduling/signatures.py),
  ``Idempotency-Key`` = the wake occurrence id, within ``timeout`` seconds.
  Redirects are never followed: a 3xx is a failed dispatch.
  ``"preset": "openclaw"`` posts to an OpenClaw Gateway's ``POST
  /hooks/agent`` instead (``message``, ``name``, ``sessionKey``,
  ``idempotencyKey``, ``Authorization: Bearer`` the hooks token from
  ``bearer`` or the environment variable named by ``bearer_env``) and sends
  no lease: the agent takes it itself (docs/dispatch.md says why).
- ``command``: run ``argv`` (a list; ``{goal_id}``, ``{session_key}``,
  ``{occurrence_id}``, ``{prompt}`` are filled in per element, in one pass)
  without a shell, detached, its output in ``var/runs/``. The child gets an
  allowlisted environment: PATH, HOME, LANG, LC_ALL, TZ, the names listed in
  ``"env"``, and the continuation's own WAKELEDGER_GOAL_ID,
  WAKELEDGER_LEASE_TOKEN, WAKELEDGER_LEASE_GENERATION, WAKELEDGER_URL and
  WAKELEDGER_OCCURRENCE_ID — never the server's SECRET_KEY, DATABASE_URL or
  dispatcher secrets, and the lease never on its command line where ``ps``
  would show it.

Every dispatch answers a ``Result``: ``ok``; or a failure that certainly
started nothing (``uncertain=False``: refused, DNS, TLS, an error or redirect
status, an invalid value, a command that could not be spawned); or one that
may have reached the receiver (``uncertain=True``: the request was sent and
then the answer timed out or the connection broke). The uncertain-attempt rule
(docs/design.md) treats the
two differently. ``detail`` is sanitized: a status code or an error class,
never a body, a URL or a value.
"""

import http.client
import ipaddress
import json
import logging
import os
import re
import ssl
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from ledger.domain.vocabulary import LEASE_IN_ENVIRONMENT, resume_prompt
from ledger.project import siteurl
from ledger.project.dispatchers import OPENCLAW, lease_dispatchers
from ledger.project.files import open_private, private_dir
from scheduling.signatures import HEADER as SIGNATURE_HEADER
from scheduling.signatures import sign, verify_signature

__all__ = ["Result", "configured", "dispatch", "hands_over_lease", "prompt", "sign",
           "validate", "verify_signature"]

logger = logging.getLogger(__name__)

TYPES = ("webhook", "command")
WEBHOOK_KEYS = frozenset({"type", "url", "secret", "timeout", "allow_http", "preset", "bearer",
                          "bearer_env", "openclaw"})
COMMAND_KEYS = frozenset({"type", "argv", "cwd", "env"})
# What OpenClaw's /hooks/agent accepts besides the fields we fill in
# ourselves (message, name, sessionKey, idempotencyKey), with their types.
OPENCLAW_OPTIONS: dict[str, type | tuple[type, ...]] = {
    "agentId": str, "wakeMode": str, "deliver": bool, "channel": str, "to": str,
    "model": str, "thinking": str, "timeoutSeconds": int,
    # "persistent": the hook turn continues the session the key names (measured
    # on OpenClaw 2026.9.6; docs/agents.md §2) instead of a fresh one.
    "sessionMode": str}
OPENCLAW_MAX_IDEMPOTENCY_KEY = 256  # MAX_HOOK_IDEMPOTENCY_KEY_LENGTH in its gateway/hooks.ts
MAX_TIMEOUT_SECONDS = 60

# The command dispatcher's child sees these of the server's environment and
# nothing else, plus what the operator lists in "env" and what it sets itself.
BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ")
# Never passed through, whatever "env" says: they hold the server's secrets.
FORBIDDEN_ENV = frozenset({"SECRET_KEY", "DATABASE_URL"})
FORBIDDEN_ENV_PREFIX = "WAKELEDGER_"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A header-safe token: visible ASCII, so no value can inject a header line.
TOKEN = re.compile(r"[\x21-\x7e]+")

# Placeholders and the values they take. A session key is agent-chosen: it
# may not start with "-" (it could become an option of the command) and
# holds nothing a shell, a URL or another placeholder would interpret.
PLACEHOLDER = re.compile(r"\{(goal_id|session_key|occurrence_id|prompt)\}")
ANY_PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")
VALUE_PATTERNS = {
    "goal_id": re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
    "session_key": re.compile(r"[A-Za-z0-9._:@/][A-Za-z0-9._:@/-]{0,199}"),
    "occurrence_id": re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+-]{0,299}"),
}
# A proxy's "gateway timeout": the origin may have the request and still be
# working on it, so this error status is not a certain failure.
UNCERTAIN_STATUSES = frozenset({504})


@dataclass(frozen=True)
class Result:
    ok: bool
    detail: str  # sanitized: a status code or an error class, never a body
    # The request may have reached the receiver (the uncertain-attempt rule).
    uncertain: bool = False


class InvalidValue(ValueError):
    """A value failed its pattern; the message names the placeholder only."""


# ------------------------------------------------------------- configuration


def configured() -> dict[str, dict[str, Any]]:
    config = settings.WAKELEDGER_DISPATCHERS
    try:
        validate(config)
    except ImproperlyConfigured as error:
        # The configuration is read from var/dispatchers.json once it exists
        # (ledger/project/dispatchers.py): say where to correct it.
        source = getattr(settings, "WAKELEDGER_DISPATCHERS_SOURCE", "")
        if source and source != "WAKELEDGER_DISPATCHERS" and "(no such file)" not in source:
            raise ImproperlyConfigured(f"{error} (read from {source}: correct it "
                                       "there)") from None
        raise
    return config


def validate(config: Any) -> None:
    if not isinstance(config, dict):
        raise ImproperlyConfigured("WAKELEDGER_DISPATCHERS must be a JSON object of name -> spec")
    for name, spec in config.items():
        where = f"WAKELEDGER_DISPATCHERS[{name!r}]"
        if name == "none" or not isinstance(spec, dict):
            raise ImproperlyConfigured(f"{where} must be an object (and 'none' is reserved)")
        if spec.get("type") not in TYPES:
            raise ImproperlyConfigured(f"{where}.type must be one of {', '.join(TYPES)}")
        allowed = WEBHOOK_KEYS if spec["type"] == "webhook" else COMMAND_KEYS
        unknown = sorted(set(spec) - allowed)
        if unknown:  # a misspelt "allow_http" or "env" must not pass silently
            raise ImproperlyConfigured(f"{where} has unknown keys: {', '.join(unknown)}")
        if spec["type"] == "webhook":
            _validate_webhook(where, spec)
        else:
            _validate_command(where, spec)


def _validate_webhook(where: str, spec: dict[str, Any]) -> None:
    _validate_url(where, spec)
    timeout = spec.get("timeout", 10)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) \
            or not 0 < timeout <= MAX_TIMEOUT_SECONDS:
        raise ImproperlyConfigured(f"{where}.timeout must be seconds in (0, {MAX_TIMEOUT_SECONDS}]")
    preset = spec.get("preset")
    if preset not in (None, OPENCLAW):
        raise ImproperlyConfigured(f"{where}.preset must be 'openclaw' or absent")
    _validate_credentials(where, spec, preset)
    if preset == OPENCLAW:
        _validate_openclaw(where, spec)
    elif "openclaw" in spec:
        raise ImproperlyConfigured(f"{where}.openclaw needs \"preset\": \"openclaw\"")


def _validate_url(where: str, spec: dict[str, Any]) -> None:
    url = spec.get("url")
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ImproperlyConfigured(f"{where}.url must be an http(s) URL with a host")
    if any(c.isspace() or not c.isprintable() for c in url):
        raise ImproperlyConfigured(f"{where}.url must not contain spaces or control characters")
    if parts.username or parts.password or parts.fragment:
        raise ImproperlyConfigured(
            f"{where}.url must not carry credentials or a fragment (use bearer or secret)")
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when asked
    except ValueError:
        raise ImproperlyConfigured(f"{where}.url has an invalid port") from None
    if not isinstance(spec.get("allow_http", False), bool):
        raise ImproperlyConfigured(f"{where}.allow_http must be true or false")
    if parts.scheme == "http" and not _loopback(parts.hostname) and not spec.get("allow_http"):
        # The body carries a raw lease token and the bearer a Gateway token.
        raise ImproperlyConfigured(
            f"{where}.url must be https (plain http only to a loopback host, or with "
            '"allow_http": true)')


def _validate_credentials(where: str, spec: dict[str, Any], preset: str | None) -> None:
    """The body's signing secret and the receiver's bearer token."""
    if "secret" in spec and (not isinstance(spec["secret"], str) or not spec["secret"]):
        raise ImproperlyConfigured(f"{where}.secret must be a non-empty string")
    if not spec.get("secret") and preset != OPENCLAW:
        raise ImproperlyConfigured(f"{where}.secret is required to sign the body")
    if "bearer" in spec and "bearer_env" in spec:
        raise ImproperlyConfigured(f"{where}: give bearer or bearer_env, not both")
    if "bearer" in spec and (not isinstance(spec["bearer"], str)
                             or not TOKEN.fullmatch(spec["bearer"])):
        raise ImproperlyConfigured(f"{where}.bearer must be a non-empty token (no spaces)")
    if "bearer_env" in spec:
        variable = spec["bearer_env"]
        if not isinstance(variable, str) or not ENV_NAME.fullmatch(variable):
            raise ImproperlyConfigured(f"{where}.bearer_env must name an environment variable")
        if not TOKEN.fullmatch(os.environ.get(variable, "")):
            raise ImproperlyConfigured(
                f"{where}.bearer_env: {variable} is not set to a token (no spaces)")


def _validate_openclaw(where: str, spec: dict[str, Any]) -> None:
    if "bearer" not in spec and "bearer_env" not in spec:
        raise ImproperlyConfigured(
            f"{where}: the openclaw preset needs the Gateway's hooks token "
            "(bearer or bearer_env)")
    options = spec.get("openclaw", {})
    if not isinstance(options, dict):
        raise ImproperlyConfigured(f"{where}.openclaw must be an object")
    for key, value in options.items():
        kind = OPENCLAW_OPTIONS.get(key)
        if kind is None:
            raise ImproperlyConfigured(
                f"{where}.openclaw.{key} is not one of {', '.join(OPENCLAW_OPTIONS)}")
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ImproperlyConfigured(f"{where}.openclaw.{key} must be a {kind.__name__}")


def _validate_command(where: str, spec: dict[str, Any]) -> None:
    argv = spec.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise ImproperlyConfigured(f"{where}.argv must be a non-empty list of strings")
    for element in argv:
        unknown = [m for m in ANY_PLACEHOLDER.findall(element) if not PLACEHOLDER.fullmatch(m)]
        if unknown:
            raise ImproperlyConfigured(
                f"{where}.argv uses {', '.join(unknown)}; the placeholders are "
                "{goal_id}, {session_key}, {occurrence_id}, {prompt}")
    if "cwd" in spec and not isinstance(spec["cwd"], str):
        raise ImproperlyConfigured(f"{where}.cwd must be a path")
    passed = spec.get("env", [])
    if not isinstance(passed, list) or not all(isinstance(n, str) for n in passed):
        raise ImproperlyConfigured(f"{where}.env must be a list of environment variable names")
    for variable in passed:
        if not ENV_NAME.fullmatch(variable):
            raise ImproperlyConfigured(f"{where}.env: {variable!r} is not a variable name")
        if variable in FORBIDDEN_ENV or variable.startswith(FORBIDDEN_ENV_PREFIX):
            raise ImproperlyConfigured(
                f"{where}.env may not pass {variable}: it holds the server's secrets or is "
                "set by the dispatcher itself")


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def hands_over_lease(name: str) -> bool:
    """Whether dispatcher ``name`` delivers the lease its wake grants. The
    openclaw preset does not (its message lands in Gateway transcripts), so
    for it, as for ``none``, the agent takes the lease itself."""
    return name in lease_dispatchers()


# ------------------------------------------------------------------- prompt

# Where each dispatcher puts the lease; the prompt must say the truth. The
# prompt's wording is the domain's (``vocabulary.resume_prompt``), shared with
# ``wakeledger supervise`` and the Claude Code hook.
LEASE_IN_BODY = ("Your lease is in this request's lease field (token, generation; "
                 "API: api_url).")


def prompt(packet: dict[str, Any], goal_id: str, *, lease_hint: str | None = None) -> str:
    """The message a resumed agent gets; ``lease_hint`` says where this
    dispatcher put the lease (default: the environment)."""
    return resume_prompt(packet, goal_id, lease_hint=lease_hint or LEASE_IN_ENVIRONMENT)


def _lease_to_take(goal_id: str) -> str:
    return (f"No lease comes with this message: take it yourself before any work with "
            f"POST {_api_url()}/goals/{goal_id}/lease (CLI: wakeledger lease --goal "
            f"{goal_id}) and keep it out of chat.")


def _api_url() -> str:
    return siteurl.api_url()


# ----------------------------------------------------------------- dispatch


def dispatch(name: str, *, goal_id: str, occurrence_id: str, session_key: str,
             packet: dict[str, Any], report: dict[str, Any], lease: dict[str, Any]) -> Result:
    try:
        spec = configured().get(name)
    except ImproperlyConfigured:
        # Checked at start-up; only a bearer_env unset since then gets here.
        # A certain failure to record, not a crashed task after the claim.
        return Result(False, "ImproperlyConfigured")
    if spec is None:
        return Result(False, f"unknown dispatcher {name}")
    try:
        # The goal id names the command's log file and every prompt: checked
        # whatever the dispatcher; the others where they are used.
        goal_id = _checked("goal_id", goal_id.lower())
        occurrence_id = _checked("occurrence_id", occurrence_id)
        if spec["type"] == "command":
            return _command(spec, goal_id=goal_id, occurrence_id=occurrence_id,
                            session_key=session_key, lease=lease,
                            text=prompt(packet, goal_id))
        if spec.get("preset") == OPENCLAW:
            return _openclaw(spec, goal_id=goal_id, occurrence_id=occurrence_id,
                             session_key=_checked("session_key", session_key)
                             if session_key else "", packet=packet)
    except InvalidValue as error:
        return Result(False, str(error))
    payload = {"goal_id": goal_id, "occurrence_id": occurrence_id, "report": report,
               "resume_packet": packet, "lease": lease,
               "prompt": prompt(packet, goal_id, lease_hint=LEASE_IN_BODY),
               "api_url": _api_url()}
    return _post(spec, payload, occurrence_id)


def _checked(placeholder: str, value: str) -> str:
    if not isinstance(value, str) or not VALUE_PATTERNS[placeholder].fullmatch(value):
        raise InvalidValue(f"invalid {placeholder}")
    return value


def _openclaw(spec: dict[str, Any], *, goal_id: str, occurrence_id: str, session_key: str,
              packet: dict[str, Any]) -> Result:
    """OpenClaw Gateway ``POST /hooks/agent``: an isolated agent turn."""
    if len(occurrence_id) > OPENCLAW_MAX_IDEMPOTENCY_KEY:
        # The Gateway would silently drop a longer key, and with it the
        # deduplication of a retried wake. Internal ids are under 100.
        raise InvalidValue("invalid occurrence_id")
    payload: dict[str, Any] = {
        **spec.get("openclaw", {}),
        "message": prompt(packet, goal_id, lease_hint=_lease_to_take(goal_id)),
        "name": "Wake Ledger",
        "idempotencyKey": occurrence_id,
    }
    if session_key:  # without one the Gateway picks its default hook session
        payload["sessionKey"] = session_key
    return _post(spec, payload, occurrence_id)


def _post(spec: dict[str, Any], payload: dict[str, Any], occurrence_id: str) -> Result:
    body = json.dumps(payload, sort_keys=True).encode()
    headers = {"Content-Type": "application/json", "Idempotency-Key": occurrence_id,
               "User-Agent": "wakeledger"}
    if spec.get("secret"):
        headers[SIGNATURE_HEADER] = sign(spec["secret"], body)
    bearer = spec.get("bearer") or (os.environ.get(spec["bearer_env"], "")
                                    if spec.get("bearer_env") else "")
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    return _send(spec["url"], body, headers, float(spec.get("timeout", 10)))


def _send(url: str, body: bytes, headers: dict[str, str], timeout: float) -> Result:
    """One POST, no redirects, no proxies, and a clear line between "nothing
    reached the receiver" (before the request was sent) and "it may have"
    (after). http.client, not urllib: urllib follows redirects (re-sending the
    Authorization header as a GET) and hides where a failure happened."""
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    # The port always explicit: given none, http.client would read "::1" as
    # host "::" and port 1.
    https = parts.scheme == "https"
    port = parts.port or (443 if https else 80)
    connection: http.client.HTTPConnection
    if https:
        connection = http.client.HTTPSConnection(parts.hostname, port, timeout=timeout,
                                                 context=ssl.create_default_context())
    else:
        connection = http.client.HTTPConnection(parts.hostname, port, timeout=timeout)
    try:
        try:
            connection.connect()  # DNS, TCP and TLS: nothing was sent yet
            # Headers are only buffered: a bad value fails here, unsent.
            connection.putrequest("POST", target)
            for name, value in {**headers, "Content-Length": str(len(body))}.items():
                connection.putheader(name, value)
        except (OSError, ValueError, http.client.HTTPException) as error:
            # The class only: an error's text may quote the host or the URL.
            return Result(False, type(error).__name__)
        try:
            connection.endheaders(body)  # from here on the receiver may act
            answer = connection.getresponse()
            status = answer.status
        except (OSError, http.client.HTTPException) as error:
            # Sent, or partly sent: the receiver may have acted on it.
            return Result(False, f"{type(error).__name__} after sending", uncertain=True)
    finally:
        connection.close()
    if 200 <= status < 300:
        return Result(True, f"HTTP {status}")
    return Result(False, f"HTTP {status}", uncertain=status in UNCERTAIN_STATUSES)


def _command(spec: dict[str, Any], *, goal_id: str, occurrence_id: str, session_key: str,
             lease: dict[str, Any], text: str) -> Result:
    values = {"goal_id": goal_id, "session_key": session_key, "occurrence_id": occurrence_id,
              "prompt": text}

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in VALUE_PATTERNS:
            return _checked(name, values[name])
        return values[name]  # the prompt: free text, but always one argv element

    # One pass per element: a substituted value is never scanned again, so a
    # session key "{prompt}" stays those eight characters. No shell, no format.
    argv = [PLACEHOLDER.sub(fill, element) for element in spec["argv"]]
    # The output may hold what the agent printed: the service user's alone
    # from the first byte (0700 / 0600), like everything under var/.
    runs = private_dir(settings.WAKELEDGER_RUNS_DIR)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    log_path = runs / f"{goal_id}-{stamp}.log"
    try:
        with open_private(log_path) as log:
            subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,  # noqa: S603
                             stderr=subprocess.STDOUT, env=child_environment(spec, {
                                 "WAKELEDGER_GOAL_ID": goal_id,
                                 "WAKELEDGER_LEASE_TOKEN": lease["token"],
                                 "WAKELEDGER_LEASE_GENERATION": str(lease["generation"]),
                                 "WAKELEDGER_URL": _api_url(),
                                 "WAKELEDGER_OCCURRENCE_ID": occurrence_id}),
                             start_new_session=True, cwd=spec.get("cwd") or None)
    except OSError as error:
        return Result(False, type(error).__name__)
    return Result(True, f"started, output in {log_path.name}")


def child_environment(spec: dict[str, Any], continuation: dict[str, str]) -> dict[str, str]:
    """The allowlist: a few variables every program expects, the operator's
    passthrough names, and the continuation's own. Nothing else of the
    server's environment (SECRET_KEY, DATABASE_URL, dispatcher secrets)."""
    names = (*BASE_ENV, *spec.get("env", ()))
    return {**{n: os.environ[n] for n in names if n in os.environ}, **continuation}

"""Dispatchers: what a granted internal wake does with its continuation.

Configured by operators in WAKELEDGER_DISPATCHERS (JSON), never by agents; a
goal only names one (``policy.dispatch``). Types:

- ``webhook``: POST the resume packet and the new lease as JSON to ``url``,
  signed ``X-Wakeledger-Signature: sha256=<hmac of the body with secret>``,
  ``Idempotency-Key`` = the wake occurrence id, within ``timeout`` seconds.
  ``"preset": "openclaw"`` shapes the body for OpenClaw's Gateway
  ``POST /hooks/agent`` (``message``, ``sessionKey``, ``idempotencyKey``) and
  sends ``Authorization: Bearer <bearer>``.
- ``command``: run ``argv`` (a list; ``{goal_id}``, ``{session_key}``,
  ``{occurrence_id}``, ``{prompt}`` are filled in per element) without a
  shell, detached, its output in ``var/runs/``. The lease reaches it in the
  environment (WAKELEDGER_LEASE_TOKEN, _GENERATION, _GOAL_ID, WAKELEDGER_URL),
  never on its command line where ``ps`` would show it.
"""

import hashlib
import hmac
import json
import logging
import os
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from ledger import siteurl

logger = logging.getLogger(__name__)

TYPES = ("webhook", "command")
PLACEHOLDERS = ("goal_id", "session_key", "occurrence_id", "prompt")


@dataclass(frozen=True)
class Result:
    ok: bool
    detail: str  # sanitized: a status code or an error class, never a body


def configured() -> dict[str, dict[str, Any]]:
    config = settings.WAKELEDGER_DISPATCHERS
    validate(config)
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
        if spec["type"] == "webhook":
            if not str(spec.get("url", "")).startswith(("http://", "https://")):
                raise ImproperlyConfigured(f"{where}.url must be an http(s) URL")
            if not spec.get("secret") and spec.get("preset") != "openclaw":
                raise ImproperlyConfigured(f"{where}.secret is required to sign the body")
            if spec.get("preset") not in (None, "openclaw"):
                raise ImproperlyConfigured(f"{where}.preset must be 'openclaw' or absent")
        else:
            argv = spec.get("argv")
            if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
                raise ImproperlyConfigured(f"{where}.argv must be a non-empty list of strings")


def names() -> frozenset[str]:
    return frozenset(configured())


def prompt(packet: dict[str, Any], goal_id: str) -> str:
    """The message a resumed agent gets: what to do, from where, and how."""
    checkpoint = packet["checkpoint"]
    lines = [
        f"Resume Wake Ledger goal {goal_id}: {packet['objective']}",
        f"Latest checkpoint: {checkpoint['current_step']} ({checkpoint['progress_pct']} %).",
        "Next actions: " + ("; ".join(packet["next_actions"]) or "(none recorded)"),
        "Done when: " + ("; ".join(packet["done_criteria"]) or "(not stated)"),
    ]
    if packet["artifacts_to_verify"]:
        lines.append("Verify before continuing: " + ", ".join(
            f"{a['path']} (sha256 {a['sha256'][:12]}…)" for a in packet["artifacts_to_verify"]))
    lines.append("Your lease is in WAKELEDGER_LEASE_TOKEN / WAKELEDGER_LEASE_GENERATION; "
                 "checkpoint after each verified step and stop on lease_lost.")
    return "\n".join(lines)


def dispatch(name: str, *, goal_id: str, occurrence_id: str, session_key: str,
             packet: dict[str, Any], report: dict[str, Any], lease: dict[str, Any]) -> Result:
    spec = configured().get(name)
    if spec is None:
        return Result(False, f"unknown dispatcher {name}")
    text = prompt(packet, goal_id)
    if spec["type"] == "webhook":
        return _webhook(spec, goal_id=goal_id, occurrence_id=occurrence_id,
                        session_key=session_key, packet=packet, report=report, lease=lease,
                        text=text)
    return _command(spec, goal_id=goal_id, occurrence_id=occurrence_id,
                    session_key=session_key, lease=lease, text=text)


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _webhook(spec: dict[str, Any], *, goal_id: str, occurrence_id: str, session_key: str,
             packet: dict[str, Any], report: dict[str, Any], lease: dict[str, Any],
             text: str) -> Result:
    headers = {"Content-Type": "application/json", "Idempotency-Key": occurrence_id,
               "User-Agent": "wakeledger"}
    if spec.get("preset") == "openclaw":
        payload: dict[str, Any] = {"message": text, "sessionKey": session_key,
                                   "idempotencyKey": occurrence_id}
        if spec.get("bearer"):
            headers["Authorization"] = f"Bearer {spec['bearer']}"
    else:
        payload = {"goal_id": goal_id, "occurrence_id": occurrence_id, "report": report,
                   "resume_packet": packet, "lease": lease, "prompt": text,
                   "api_url": siteurl.api_url()}
    body = json.dumps(payload, sort_keys=True).encode()
    if spec.get("secret"):
        headers["X-Wakeledger-Signature"] = sign(spec["secret"], body)
    request = urllib.request.Request(spec["url"], data=body, headers=headers,  # noqa: S310
                                     method="POST")  # the URL's scheme was validated
    try:
        with urllib.request.urlopen(request, timeout=float(spec.get("timeout", 10))) as answer:  # noqa: S310
            return Result(200 <= answer.status < 300, f"HTTP {answer.status}")
    except urllib.error.HTTPError as error:
        return Result(False, f"HTTP {error.code}")
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        # The class only: an error's text may quote the URL with its credentials.
        return Result(False, type(error).__name__)


def _command(spec: dict[str, Any], *, goal_id: str, occurrence_id: str, session_key: str,
             lease: dict[str, Any], text: str) -> Result:
    values = {"goal_id": goal_id, "session_key": session_key, "occurrence_id": occurrence_id,
              "prompt": text}
    # str.replace, not str.format: agent-supplied text must never be able to
    # reach format's attribute lookups, and nothing here goes through a shell.
    argv = []
    for element in spec["argv"]:
        for name in PLACEHOLDERS:
            element = element.replace("{" + name + "}", values[name])
        argv.append(element)
    runs = settings.WAKELEDGER_RUNS_DIR
    runs.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    log_path = runs / f"{goal_id}-{stamp}.log"
    env = {**os.environ, "WAKELEDGER_GOAL_ID": goal_id,
           "WAKELEDGER_LEASE_TOKEN": lease["token"],
           "WAKELEDGER_LEASE_GENERATION": str(lease["generation"]),
           "WAKELEDGER_URL": siteurl.api_url(),
           "WAKELEDGER_OCCURRENCE_ID": occurrence_id}
    try:
        with open(log_path, "ab") as log:
            subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,  # noqa: S603
                             stderr=subprocess.STDOUT, env=env, start_new_session=True,
                             cwd=spec.get("cwd") or None)
    except OSError as error:
        return Result(False, type(error).__name__)
    return Result(True, f"started, output in {log_path.name}")

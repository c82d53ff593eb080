"""Where notifications go: Apprise URLs from WAKELEDGER_NOTIFY and from the
admin's channels, their redacted form, their encryption at rest, and routing.

WAKELEDGER_NOTIFY is either Apprise URLs separated by whitespace, or a JSON
list whose items are URLs or objects ``{"url", "agents", "workspaces",
"reasons"}`` (routing; each a list, empty or absent meaning all). Every URL
must load in Apprise, or start-up stops naming the entry by its position
(never its text: it carries credentials).

A channel is named in an outbox row by a reference that holds no secret:
``env:<12 hex of the URL's SHA-256>`` or ``admin:<pk>``; the sender resolves
it when it sends, so a URL never sits in a notification row.
"""

import base64
import hashlib
import json
import logging
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import urlsplit

from cryptography.fernet import Fernet, InvalidToken
from django.core.exceptions import ImproperlyConfigured

from ledger.notify.models import Channel

# Apprise logs a service's answers and parts of URLs (a webhook's path, an
# e-mail address): none of it reaches our logs. A handler of its own, so
# Python's last-resort handler does not print what propagation would have.
_apprise_log = logging.getLogger("apprise")
_apprise_log.propagate = False
_apprise_log.addHandler(logging.NullHandler())


@dataclass(frozen=True)
class Route:
    """A channel as the recorder sees it: its reference, redacted URL, filters."""

    ref: str
    redacted: str
    agents: tuple[str, ...] = ()
    workspaces: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()

    def takes(self, *, agent: str = "", workspace: str = "", reason: str = "",
              goal: bool = True) -> bool:
        """Whether a notice goes to this channel. A notice about no goal (the
        digest, the scheduler's) goes only to channels not narrowed to agents
        or workspaces."""
        if not goal and (self.agents or self.workspaces):
            return False
        if goal and self.agents and agent not in self.agents:
            return False
        if goal and self.workspaces and not any(_under(workspace, w) for w in self.workspaces):
            return False
        return not self.reasons or not reason or reason in self.reasons


def _under(workspace: str, prefix: str) -> bool:
    prefix = prefix.rstrip("/")
    return workspace == prefix or workspace.startswith(prefix + "/")


def _load(url: str) -> "Any":
    # Imported here: Apprise costs a tenth of a second to import, which a
    # process with no channel (every `ledger` command, most tests) never pays.
    import apprise

    return apprise.Apprise.instantiate(url)


def redact(url: str) -> str:
    """What may be shown of an Apprise URL: its scheme and host (as Apprise
    masks it when the host is itself a token), never a password, a path or a
    query (a webhook's path is often its secret)."""
    plugin = _load(url)
    shown = plugin.url(privacy=True) if plugin is not None else url
    parts = urlsplit(shown)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    user = "****@" if parts.username or parts.password else ""
    tail = "/…" if parts.path.strip("/") or parts.query else ""
    return f"{parts.scheme}://{user}{host}{tail}"[:300]


def valid(url: str) -> bool:
    return _load(url) is not None


def env_ref(url: str) -> str:
    return "env:" + hashlib.sha256(url.encode()).hexdigest()[:12]


@cache
def _parse_env(raw: str) -> tuple[tuple[Route, str], ...]:
    text = raw.strip()
    if not text:
        return ()
    if text.startswith("["):
        try:
            items = json.loads(text)
        except ValueError as error:
            raise ImproperlyConfigured(f"WAKELEDGER_NOTIFY is not valid JSON: {error.msg} "
                                       f"(line {error.lineno})") from None
        if not isinstance(items, list):
            raise ImproperlyConfigured("WAKELEDGER_NOTIFY must be a JSON list.")
    else:
        items = text.split()
    found = []
    for number, item in enumerate(items, 1):
        spec = {"url": item} if isinstance(item, str) else item
        where = f"WAKELEDGER_NOTIFY entry {number}"
        if not isinstance(spec, dict) or set(spec) - {"url", "agents", "workspaces", "reasons"}:
            raise ImproperlyConfigured(f"{where}: an Apprise URL or an object with url, "
                                       "agents, workspaces, reasons.")
        url = spec.get("url")
        if not isinstance(url, str) or not valid(url):
            raise ImproperlyConfigured(f"{where} is not an Apprise URL Apprise can load "
                                       "(its text is not shown: it may carry credentials).")
        lists = {}
        for name in ("agents", "workspaces", "reasons"):
            value = spec.get(name, [])
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise ImproperlyConfigured(f"{where}: {name} must be a list of strings.")
            lists[name] = tuple(value)
        found.append((Route(env_ref(url), redact(url), **lists), url))
    return tuple(found)


def env_channels() -> tuple[tuple[Route, str], ...]:
    """The channels of WAKELEDGER_NOTIFY (parsed once per value)."""
    from django.conf import settings

    return _parse_env(settings.WAKELEDGER_NOTIFY)


def _lines(text: str) -> tuple[str, ...]:
    return tuple(line.strip() for line in text.splitlines() if line.strip())


def routes() -> list[Route]:
    """Every channel a notice may go to: the environment's, then the admin's."""
    found = [route for route, _ in env_channels()]
    for channel in Channel.objects.filter(enabled=True).order_by("pk"):
        found.append(Route(f"admin:{channel.pk}", channel.url_redacted, _lines(channel.agents),
                           _lines(channel.workspaces), _lines(channel.reasons)))
    return found


def url_of(ref: str) -> str | None:
    """The URL behind a reference, for the sender only (None when the channel
    is gone or disabled, or its URL cannot be decrypted any more)."""
    if ref.startswith("env:"):
        return next((url for route, url in env_channels() if route.ref == ref), None)
    if ref.startswith("admin:") and ref[6:].isdigit():
        channel = Channel.objects.filter(pk=int(ref[6:]), enabled=True).first()
        if channel is not None:
            return decrypt(channel.url_encrypted)
    return None


def _fernet() -> Fernet:
    # A key of its own, derived from SECRET_KEY by the one derivation.
    from ledger.access.derivation import derived

    return Fernet(base64.urlsafe_b64encode(base64.urlsafe_b64decode(
        derived("notify-channel-key") + "=")))


def encrypt(url: str) -> str:
    return _fernet().encrypt(url.encode()).decode()


def decrypt(token: str) -> str | None:
    """None when SECRET_KEY changed since it was stored: re-enter the URL."""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        return None

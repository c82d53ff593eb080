"""The dispatchers: the one file every process reads them from, and which of
them hand over the lease their wake grants.

Every process (the web, the qcluster, `manage.py ledger wake` from any shell)
reads the same file, ``var/dispatchers.json`` by default
(``WAKELEDGER_DISPATCHERS_FILE``), when its settings load. The environment
variable ``WAKELEDGER_DISPATCHERS`` is only a seed: with no file yet, its value
is used and written to the file (0600: commands and webhooks may hold tokens);
with a file, it must say the same or the process refuses to start. Before
this, each process read its own environment, and a shell without the server's
variable made a pushed goal ready for pull.

Push or pull is a fact every internal or operator wake's claim needs (decided
in the domain on the locked state: ``ledger.domain.claims.pushed``);
``scheduling.dispatch`` validates the whole configuration at start-up and
sends the dispatches.
"""

import json
import os
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# The OpenClaw Gateway preset posts a message that lands in the Gateway's
# transcripts: it carries no lease, so its wakes are pulled like "none".
OPENCLAW = "openclaw"
VARIABLE = "WAKELEDGER_DISPATCHERS"


def load(path: Path | None, from_env: str | None) -> tuple[dict[str, Any], str]:
    """The configuration and where it came from (a place, never a value).

    ``path`` None: no file (the test suite's processes, configured in-process
    or by the variable alone). Disagreement is refused, never resolved by a
    precedence rule: which one the operator meant is theirs to say.
    """
    env_value = _parse(from_env, VARIABLE) if from_env and from_env.strip() else None
    if path is None:
        return (env_value or {}), VARIABLE
    try:
        text = path.read_text()
    except FileNotFoundError:
        if env_value is None:
            return {}, f"{path} (no such file)"
        _seed(path, env_value)
        return env_value, f"{path} (seeded from {VARIABLE})"
    except OSError as error:
        raise ImproperlyConfigured(f"{path} cannot be read: {error.strerror}") from None
    from_file = _parse(text, str(path))
    if env_value is not None and env_value != from_file:
        # Named, never shown: the values may hold tokens.
        raise ImproperlyConfigured(
            f"{VARIABLE} disagrees with {path}: every process reads the file; "
            f"unset {VARIABLE} (or make it the same), or edit the file")
    return from_file, str(path)


def _parse(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as error:
        raise ImproperlyConfigured(f"{where} is not valid JSON: {error}") from None


def _seed(path: Path, value: Any) -> None:
    """Written once, 0600, with O_EXCL: two processes starting together (the
    web and the qcluster) write it once; the loser reads the same value."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with open(fd, "w") as handle:
        json.dump(value, handle, indent=2, sort_keys=True)
        handle.write("\n")


def names() -> frozenset[str]:
    """The dispatchers a goal may name (its ``policy.dispatch``, beside "none")."""
    return frozenset(settings.WAKELEDGER_DISPATCHERS)


def lease_dispatchers() -> frozenset[str]:
    config = settings.WAKELEDGER_DISPATCHERS
    return frozenset(name for name, spec in config.items()
                     if isinstance(spec, dict) and spec.get("preset") != OPENCLAW)


def why_pulled(dispatch: str) -> str:
    """Why a goal whose policy names ``dispatch`` is made ready for pull."""
    if dispatch == "none":
        return "its dispatcher is none: its agent takes the lease"
    config = settings.WAKELEDGER_DISPATCHERS
    if dispatch not in config:
        return (f"its dispatcher {dispatch!r} is not configured in "
                f"{settings.WAKELEDGER_DISPATCHERS_SOURCE}")
    return f"its dispatcher {dispatch!r} (an OpenClaw message) hands over no lease"


def described() -> list[dict[str, str]]:
    """Each configured dispatcher as the admin shows it: name, type and a
    redacted target. Never a secret: a webhook shows its scheme, host and
    port only (a path or query may carry a token, and ``secret`` and
    ``bearer`` are named, not shown); a command shows its program's name and
    how many arguments and variables it is given, never their values."""
    listed = []
    for name, spec in sorted(settings.WAKELEDGER_DISPATCHERS.items()):
        spec = spec if isinstance(spec, dict) else {}
        kind = str(spec.get("type", "?"))
        if spec.get("preset"):
            kind += f" ({spec['preset']})"
        listed.append({"name": name, "type": kind, "target": _target(spec)})
    return listed


def _target(spec: dict[str, Any]) -> str:
    if spec.get("type") == "webhook":
        try:
            parts = urlsplit(str(spec.get("url", "")))
            host = f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)
        except ValueError:
            return "(an invalid URL)"
        rest = "/…" if parts.path.strip("/") or parts.query else ""
        signed = [f"{key} set" for key in ("secret", "bearer") if spec.get(key)]
        return f"{parts.scheme}://{host}{rest}" + (f" ({', '.join(signed)})" if signed else "")
    argv = spec.get("argv")
    if isinstance(argv, list) and argv:
        env = spec.get("env") if isinstance(spec.get("env"), dict) else {}
        return (f"{PurePosixPath(str(argv[0])).name} with {len(argv) - 1} argument(s)"
                + (f", {len(env)} variable(s)" if env else ""))
    return "—"

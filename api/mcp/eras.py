"""The era a ``/mcp`` message is served in. ``views`` stamps the revision it
serves into every message's ``_meta`` (the SDK's protocol-version key) before
a handler runs, so every handler reads the era there, from one rule."""

from typing import Any

from mcp_types import PROTOCOL_VERSION_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS


def modern(meta: dict[str, Any]) -> bool:
    """Whether the message is served at a per-request-envelope revision (2026-07-28)."""
    return meta.get(PROTOCOL_VERSION_META_KEY) in MODERN_PROTOCOL_VERSIONS

"""OAuth access tokens for /mcp (filled in below)."""

from api.mcp.inprocess import Principal


def principal(token: str) -> Principal | None:
    return None

"""The server's own base URL, for the links it prints and sends."""

from django.conf import settings
from django.http import HttpRequest


def base_url(request: HttpRequest | None = None) -> str:
    """SITE_URL when it is set; otherwise the address this request came to
    (so `make run PORT=8765` serves links on 8765, and a LAN name stays a LAN
    name); without a request, the local address on WAKELEDGER_PORT."""
    if settings.SITE_URL:
        return settings.SITE_URL
    if request is not None:
        return request.build_absolute_uri("/").rstrip("/")
    return settings.LOCAL_URL


def api_url(request: HttpRequest | None = None) -> str:
    return f"{base_url(request)}/api/v1"

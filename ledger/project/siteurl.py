"""The server's own base URL, for the links it prints and sends."""

from django.conf import settings
from django.http import HttpRequest
from django.urls import reverse


def base_url(request: HttpRequest | None = None) -> str:
    """SITE_URL when it is set; otherwise the address this request came to
    (so `make run PORT=8765` serves links on 8765, and a LAN name stays a LAN
    name); without a request, the local address on WAKELEDGER_PORT."""
    if settings.SITE_URL:
        return settings.SITE_URL
    if request is not None:
        return request.build_absolute_uri("/").rstrip("/")
    return settings.LOCAL_URL


def known_base_url() -> str | None:
    """The base URL where no request tells the host, if it is known: SITE_URL,
    or the local address when WAKELEDGER_PORT names the port; None otherwise
    (a command run on its own: the server may be on any port)."""
    if settings.SITE_URL:
        return settings.SITE_URL
    return settings.LOCAL_URL if settings.LOCAL_PORT_KNOWN else None


def admin_address() -> str:
    """Where the admin is, for a command to print: a full URL when it is
    known, otherwise its path and how to find the rest (never a guessed port)."""
    path = reverse("admin:index")
    base = known_base_url()
    if base is not None:
        return f"{base}{path}"
    return (f"{path} on the server's address (`make run` prints it; set SITE_URL to "
            "have commands print the full URL)")


def api_url(request: HttpRequest | None = None) -> str:
    return f"{base_url(request)}/api/v1"

"""The one key derivation under SECRET_KEY: the derived tokens
(``ledger.services.tokens``) and the notification channels' encryption key
(``ledger.notify.channels``) both come from it. Here, below both, so that
neither layer imports the other."""

import base64
import hmac

from django.conf import settings


def derived(purpose: str, *parts: str) -> str:
    """The one derivation: URL-safe base64 of HMAC-SHA256(SECRET_KEY,
    "wakeledger.<purpose>" and the parts, one per line)."""
    material = "\n".join((f"wakeledger.{purpose}", *parts)).encode()
    # hmac.digest: the same MAC as hmac.new(...).digest() in one call to
    # OpenSSL, without the HMAC object (every scheduled claim derives one).
    mac = hmac.digest(settings.SECRET_KEY.encode(), material, "sha256")
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")

"""API tokens: ``wl_<prefix>_<secret>``; stored as prefix + HMAC-SHA256 digest."""

import hmac
import secrets
import string

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.utils.crypto import salted_hmac

from api.models import ApiToken

_ALPHABET = string.ascii_letters + string.digits


def digest(token: str) -> str:
    # Keyed with SECRET_KEY: a stolen table of digests cannot be checked
    # offline without it. Rotating SECRET_KEY invalidates every token.
    return salted_hmac("wakeledger.api-token", token, secret=settings.SECRET_KEY,
                       algorithm="sha256").hexdigest()


def issue(user: AbstractBaseUser) -> str:
    """Create a token for ``user`` and return it; it is never retrievable again."""
    prefix = "".join(secrets.choice(_ALPHABET) for _ in range(8))
    token = f"wl_{prefix}_{secrets.token_urlsafe(32)}"
    ApiToken.objects.create(user=user, prefix=prefix, digest=digest(token))
    return token


def authenticate(token: str) -> ApiToken | None:
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != "wl" or len(parts[1]) != 8:
        return None
    found = (ApiToken.objects.select_related("user")
             .filter(prefix=parts[1], revoked_at__isnull=True).first())
    # Compare even when nothing was found, so timing does not tell whether a
    # prefix exists.
    expected = found.digest if found else "0" * 64
    if not hmac.compare_digest(expected, digest(token)) or found is None:
        return None
    if not found.user.is_active:
        return None
    return found

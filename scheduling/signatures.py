"""Webhook signatures with a timestamp, as Stripe and Standard Webhooks do.

    X-Wakeledger-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>

The MAC covers ``f"{t}.".encode() + body``: a receiver that checks the MAC and
that ``t`` is recent rejects a captured request replayed later (the replay
window is ``tolerance``). Standard library only, so a receiver written in
Python can copy this file as it is; docs/dispatch.md has the recipe.
"""

import hashlib
import hmac
import time

HEADER = "X-Wakeledger-Signature"
TOLERANCE_SECONDS = 300
SCHEME = "v1"


def mac(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes, *, timestamp: int | None = None) -> str:
    """The header value for ``body``, stamped now (wall-clock seconds: the
    receiver compares it with its own clock, not with the ledger's)."""
    stamp = int(time.time()) if timestamp is None else timestamp
    return f"t={stamp},{SCHEME}={mac(secret, stamp, body)}"


def verify_signature(secret: str, header: str | None, body: bytes, *,
                     now: float | None = None, tolerance: int = TOLERANCE_SECONDS) -> bool:
    """True when ``header`` signs ``body`` with ``secret`` and its timestamp is
    within ``tolerance`` seconds of ``now`` (either side: a clock running
    ahead must not stretch the window). Several ``v1`` entries are accepted
    (one per secret while a secret is being rotated); anything malformed is
    False, never an exception."""
    if not header or not secret:
        return False
    stamps: list[str] = []
    macs: list[str] = []
    for part in header.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            return False
        if key == "t":
            stamps.append(value)
        elif key == SCHEME:
            macs.append(value)
    if len(stamps) != 1 or not stamps[0].isascii() or not stamps[0].isdigit() or not macs:
        return False
    stamp = int(stamps[0])
    current = time.time() if now is None else now
    if abs(current - stamp) > tolerance:
        return False
    expected = mac(secret, stamp, body)
    # compare_digest on every candidate: the time taken says nothing about
    # which one (or how much of it) matched.
    return any([hmac.compare_digest(expected.encode(), m.encode()) for m in macs])

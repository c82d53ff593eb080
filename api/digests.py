"""Keyed digests of references the ledger must recognise but never reveal.

A host task id (an OpenClaw cron job id, a systemd unit, a Kubernetes
CronJob name) is often short or guessable: its plain SHA-256 is recovered by
hashing candidates. Keyed with a key derived from SECRET_KEY, the digest
cannot be checked offline without the key. Still 64 hex characters, so the
event field ``host_ref_sha256`` keeps its shape. Rotating SECRET_KEY changes
the digest of the same reference (nothing compares old digests today).
"""

from django.conf import settings
from django.utils.crypto import salted_hmac


def host_ref_digest(ref: str) -> str:
    # salted_hmac derives the HMAC key from the salt and SECRET_KEY, so this
    # key is distinct from the one that digests API tokens.
    return salted_hmac("wakeledger.host-ref", ref, secret=settings.SECRET_KEY,
                       algorithm="sha256").hexdigest()

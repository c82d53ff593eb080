"""The Ed25519 key that signs tree heads.

Read from ``WAKELEDGER_SIGNING_KEY_FILE`` (PEM, PKCS 8), generated there on
first use when absent: created with O_EXCL and mode 0600, so two processes
starting together cannot each write a different key, and nobody else can read
it. The private key never enters the database or a log line; only its public
half and key id do (``SigningKey``), so old heads stay checkable after a
rotation (move the file away; the next seal makes a new key).
"""

import base64
import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from wakeledger_verify import heads, notes


@dataclass(frozen=True)
class Signer:
    private_key: Ed25519PrivateKey
    key_id: str
    public_pem: str

    def sign(self, head: dict[str, Any]) -> str:
        """The base64 signature over ``head``'s signed fields (its key_id must be ours)."""
        if head["key_id"] != self.key_id:
            raise ValueError("a head names the key that signs it")
        return base64.b64encode(self.private_key.sign(heads.signed_bytes(head))).decode()

    def note_verifier(self) -> notes.Verifier:
        """The checkpoints' note key: named after the log's origin. The same
        Ed25519 key as the JSON heads': a note body starts with the origin, a
        head's signed bytes with heads.PREFIX, so neither reads as the other."""
        return notes.verifier(settings.WAKELEDGER_LOG_ORIGIN, self.private_key.public_key())

    def checkpoint(self, size: int, root: bytes) -> str:
        """The C2SP tlog-checkpoint of (size, root), signed as a note."""
        body = notes.Checkpoint(settings.WAKELEDGER_LOG_ORIGIN, size, root).body()
        return notes.format_note(body, [notes.sign(body, settings.WAKELEDGER_LOG_ORIGIN,
                                                   self.private_key)])


def signer(path: Path | None = None) -> Signer:
    path = Path(path or settings.WAKELEDGER_SIGNING_KEY_FILE)
    key = _load(path) if path.exists() else _create(path)
    public = key.public_key()
    return Signer(key, heads.key_id(public), heads.public_key_pem(public))


def _create(path: Path) -> Ed25519PrivateKey:
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _load(path)  # another process created it first: use theirs
    try:
        with open(fd, "wb") as handle:
            handle.write(pem)
    except BaseException:
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    return key


def _load(path: Path) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (ValueError, TypeError) as error:
        # The setting named, so the refusal says what to correct; the
        # library's own text cut to its first sentence (its FAQ link is noise).
        raise ImproperlyConfigured(
            f"WAKELEDGER_SIGNING_KEY_FILE: {path} is not an unencrypted PEM private key "
            f"({str(error).split('. ')[0].rstrip('.')}); point it at an Ed25519 key, or at a "
            "path that does not exist yet to have one made") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ImproperlyConfigured(f"WAKELEDGER_SIGNING_KEY_FILE: {path} holds a key that is "
                                   "not Ed25519")
    return key

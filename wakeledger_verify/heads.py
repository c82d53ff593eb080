"""Signed tree heads: what is signed, the key id, and checking a signature.

A head signs (tree size, root, time) with Ed25519, and its horizon: every
event whose database id is at most ``horizon`` is among the first ``size``
leaves (what lets a check find an event slipped in below it). The signed
bytes are a fixed prefix and the canonical JSON of exactly those fields plus
the key id, so a signature over one kind of message can never be read as
another, and a head cannot be moved to another key's name.
"""

import base64
import hashlib
from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from wakeledger_verify.records import canonical

PREFIX = b"wakeledger.tree-head.v1:"
SIGNED_FIELDS = ("size", "root", "timestamp", "key_id", "horizon")


def signed_bytes(head: Mapping[str, Any]) -> bytes:
    return PREFIX + canonical({name: head[name] for name in SIGNED_FIELDS})


def raw_public_key(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(key: Ed25519PublicKey) -> str:
    """Derived from the key itself, so nobody can name a key they do not hold
    after one the verifier trusts: ``ed25519:`` and 16 hex digits of its SHA-256."""
    return "ed25519:" + hashlib.sha256(raw_public_key(key)).hexdigest()[:16]


def public_key_pem(key: Ed25519PublicKey) -> str:
    return key.public_bytes(serialization.Encoding.PEM,
                            serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def load_public_key(text: str) -> Ed25519PublicKey:
    """A PEM public key (what the API and ``ledger key`` print); ValueError if not Ed25519."""
    key = serialization.load_pem_public_key(text.encode())
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("the public key is not an Ed25519 key")
    return key


def signature_valid(head: Mapping[str, Any], key: Ed25519PublicKey) -> bool:
    if head.get("key_id") != key_id(key):
        return False
    try:
        signature = base64.b64decode(str(head.get("signature", "")), validate=True)
        key.verify(signature, signed_bytes(head))
    except (InvalidSignature, ValueError, KeyError, TypeError):
        return False
    return True


def head_shape_error(head: Any) -> str | None:
    """Why ``head`` is not a tree head (a mapping with the signed fields), or None."""
    if not isinstance(head, Mapping):
        return "the head is not a JSON object"
    for name in (*SIGNED_FIELDS, "signature"):
        if name not in head:
            return f"the head has no {name}"
    for name in ("size", "horizon"):
        value = head[name]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return f"the head's {name} is not a whole number"
    root = head["root"]
    if not isinstance(root, str) or len(root) != 64 or not _hex(root):
        return "the head's root is not 64 hex digits"
    for name in ("timestamp", "key_id", "signature"):
        if not isinstance(head[name], str):
            return f"the head's {name} is not a string"
    return None


def _hex(text: str) -> bool:
    try:
        bytes.fromhex(text)
    except ValueError:
        return False
    return True

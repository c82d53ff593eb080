"""C2SP signed notes, ``tlog-checkpoint`` checkpoints and ``tlog-cosignature`` v1.

The format the transparency ecosystem shares (Go's checksum database, Rekor
v2, Tessera, the public witness network), so any of their tools can check
this log's heads. Standard library and ``cryptography`` only.

- A checkpoint body is three lines: the origin (names this log), the tree
  size in decimal, the root hash in base64; each ends in a newline.
- A signed note is the body, a blank line, then one line per signature:
  ``— <key name> base64(key hash (4 bytes) || signature)``.
- An Ed25519 note key (algorithm 0x01) hashes as SHA-256(name || "\\n" ||
  0x01 || public key)[:4]; its verifier key is ``name+hash+base64(0x01 || key)``.
- A cosignature/v1 (algorithm 0x04) signs ``cosignature/v1\\ntime T\\n`` and the
  checkpoint body; its signature bytes are the timestamp (8 bytes, big-endian
  seconds) then the Ed25519 signature.
- An ML-DSA-44 cosignature (algorithm 0x06, the post-quantum kind the spec
  recommends for new witnesses) signs the binary ``cosigned_message``
  (``subtree/v1\\n\\0``, the cosigner's name, the timestamp, the origin, start 0,
  end = size, the root); its signature bytes are the timestamp then the
  2,420-byte FIPS 204 signature (empty context).
"""

import base64
import hashlib
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.mldsa import MLDSA44PrivateKey, MLDSA44PublicKey

ED25519 = 0x01
COSIGNATURE_V1 = 0x04
ML_DSA_44 = 0x06  # C2SP tlog-cosignature's post-quantum cosignature
_ML_DSA_44_KEY, _ML_DSA_44_SIGNATURE = 1312, 2420
MAX_TIMESTAMP = 2**63 - 1  # a cosignature's timestamp "MUST NOT exceed 2^63 - 1"
DASH = "\u2014 "  # an em dash and a space open every signature line
MAX_SIGNATURES = 100


class NoteError(ValueError):
    """Not a signed note, or not a checkpoint, or a signature that does not verify."""


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes

    def body(self) -> str:
        return f"{self.origin}\n{self.size}\n{base64.b64encode(self.root).decode()}\n"


@dataclass(frozen=True)
class Signature:
    name: str
    key_hash: bytes
    signature: bytes  # what follows the key hash

    def line(self) -> str:
        return f"{DASH}{self.name} {base64.b64encode(self.key_hash + self.signature).decode()}\n"


@dataclass(frozen=True)
class Verifier:
    """A public note key: ``name+hash+base64(alg || key)``."""

    name: str
    algorithm: int
    key: Ed25519PublicKey | MLDSA44PublicKey

    @property
    def key_hash(self) -> bytes:
        return key_hash(self.name, self.algorithm, _raw(self.key))

    def text(self) -> str:
        encoded = base64.b64encode(bytes([self.algorithm]) + _raw(self.key)).decode()
        return f"{self.name}+{self.key_hash.hex()}+{encoded}"

    def verify(self, body: str, signature: Signature) -> int | None:
        """True-ish when ``signature`` is this key's over ``body``: for a
        cosignature its timestamp, for a log signature 0; None if not valid."""
        if signature.name != self.name or signature.key_hash != self.key_hash:
            return None
        message, raw = body.encode(), signature.signature
        timestamp = 0
        if self.algorithm == ML_DSA_44:
            return _verify_ml_dsa_44(self, body, raw)
        if self.algorithm == COSIGNATURE_V1:
            if len(raw) != 72:
                return None
            timestamp = struct.unpack(">Q", raw[:8])[0]
            message, raw = cosigned_message(body, timestamp), raw[8:]
        try:
            self.key.verify(raw, message)
        except InvalidSignature:
            return None
        return timestamp


def _verify_ml_dsa_44(verifier: Verifier, body: str, raw: bytes) -> int | None:
    if len(raw) != 8 + _ML_DSA_44_SIGNATURE or not isinstance(verifier.key, MLDSA44PublicKey):
        return None
    timestamp = struct.unpack(">Q", raw[:8])[0]
    try:
        checkpoint = parse_checkpoint(body)
        message = subtree_message(verifier.name, timestamp, checkpoint)
        verifier.key.verify(raw[8:], message)
    except (NoteError, InvalidSignature):
        return None
    return timestamp


def subtree_message(cosigner: str, timestamp: int, checkpoint: "Checkpoint") -> bytes:
    """tlog-cosignature's ``cosigned_message`` for a whole checkpoint (start 0)."""
    name, origin = cosigner.encode(), checkpoint.origin.encode()
    if not (0 < len(name) < 256 and 0 < len(origin) < 256) or timestamp > MAX_TIMESTAMP:
        raise NoteError("an ML-DSA-44 cosignature names a cosigner and an origin of 1 to "
                        "255 bytes, at a timestamp below 2^63")
    return (b"subtree/v1\n\0" + bytes([len(name)]) + name + struct.pack(">Q", timestamp)
            + bytes([len(origin)]) + origin + struct.pack(">QQ", 0, checkpoint.size)
            + checkpoint.root)


def _raw(key: Ed25519PublicKey | MLDSA44PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_hash(name: str, algorithm: int, raw_key: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([algorithm]) + raw_key).digest()[:4]


def check_name(name: str) -> str:
    if not name or "+" in name or any(c.isspace() for c in name) or not name.isprintable():
        raise NoteError(f"{name!r} is not a note key name (non-empty, no '+', no spaces)")
    return name


def verifier(name: str, key: Ed25519PublicKey | MLDSA44PublicKey,
             algorithm: int = ED25519) -> Verifier:
    return Verifier(check_name(name), algorithm, key)


def parse_verifier(text: str) -> Verifier:
    """A verifier key as ``ledger key --note`` and ``wakeledger-verify witness`` print it."""
    parts = text.strip().split("+", 2)  # base64 may hold "+" too
    if len(parts) != 3:
        raise NoteError("a note verifier key is name+hash+key")
    name, hash_hex, encoded = parts
    try:
        raw = base64.b64decode(encoded, validate=True)
        expected = bytes.fromhex(hash_hex)
    except ValueError:
        raise NoteError("a note verifier key's hash is hex and its key base64") from None
    if len(raw) == 1 + _ML_DSA_44_KEY and raw[0] == ML_DSA_44:
        found = Verifier(check_name(name), ML_DSA_44, MLDSA44PublicKey.from_public_bytes(raw[1:]))
    elif len(raw) == 33 and raw[0] in (ED25519, COSIGNATURE_V1):
        found = Verifier(check_name(name), raw[0], Ed25519PublicKey.from_public_bytes(raw[1:]))
    else:
        raise NoteError("only Ed25519 (0x01), cosignature/v1 (0x04) and ML-DSA-44 "
                        "cosignature (0x06) keys are known")
    if found.key_hash != expected:
        raise NoteError("the verifier key's hash does not match its name and key")
    return found


def sign(body: str, name: str, private_key: Ed25519PrivateKey) -> Signature:
    """The log's Ed25519 note signature over ``body``."""
    public = verifier(name, private_key.public_key())
    return Signature(name, public.key_hash, private_key.sign(body.encode()))


def cosigned_message(body: str, timestamp: int) -> bytes:
    return f"cosignature/v1\ntime {timestamp}\n".encode() + body.encode()


def cosign(body: str, name: str, private_key: Ed25519PrivateKey, timestamp: int) -> Signature:
    """A witness's cosignature/v1 over a checkpoint ``body`` at ``timestamp``."""
    public = verifier(name, private_key.public_key(), COSIGNATURE_V1)
    raw = struct.pack(">Q", timestamp) + private_key.sign(cosigned_message(body, timestamp))
    return Signature(name, public.key_hash, raw)


def cosign_ml_dsa_44(body: str, name: str, private_key: MLDSA44PrivateKey,
                     timestamp: int) -> Signature:
    """A witness's ML-DSA-44 cosignature over a checkpoint ``body`` at ``timestamp``."""
    public = verifier(name, private_key.public_key(), ML_DSA_44)
    message = subtree_message(name, timestamp, parse_checkpoint(body))
    return Signature(name, public.key_hash, struct.pack(">Q", timestamp)
                     + private_key.sign(message))


def format_note(body: str, signatures: Iterable[Signature]) -> str:
    return body + "\n" + "".join(signature.line() for signature in signatures)


def split(note: str) -> tuple[str, list[Signature]]:
    """A signed note's body and its signature lines (nothing verified yet)."""
    if not note.endswith("\n") or "\n\n" not in note:
        raise NoteError("a signed note is a text, a blank line and signature lines")
    cut = note.rindex("\n\n")
    body, block = note[:cut + 1], note[cut + 2:]
    signatures = []
    for line in block.splitlines():
        if not line.startswith(DASH):
            raise NoteError(f"not a signature line: {line[:60]!r}")
        name, _, encoded = line[len(DASH):].rpartition(" ")
        try:
            raw = base64.b64decode(encoded, validate=True)
        except ValueError:
            raise NoteError(f"signature of {name!r} is not base64") from None
        if len(raw) < 5 or not name:
            raise NoteError(f"signature line of {name!r} is too short")
        signatures.append(Signature(name, raw[:4], raw[4:]))
    if not signatures or len(signatures) > MAX_SIGNATURES:
        raise NoteError("a signed note has between 1 and 100 signatures")
    return body, signatures


def parse_checkpoint(body: str) -> Checkpoint:
    lines = body.split("\n")
    if len(lines) < 4 or lines[-1] != "":
        raise NoteError("a checkpoint is origin, size and root hash, one a line")
    origin, size, root = lines[0], lines[1], lines[2]
    if not origin or not size.isascii() or not size.isdigit() or (size != "0"
                                                                   and size[0] == "0"):
        raise NoteError("a checkpoint's first lines are a non-empty origin and a size")
    try:
        digest = base64.b64decode(root, validate=True)
    except ValueError:
        raise NoteError("a checkpoint's root hash is not base64") from None
    if len(digest) != 32:
        raise NoteError("a checkpoint's root hash is not 32 bytes")
    return Checkpoint(origin, int(size), digest)


@dataclass(frozen=True)
class Opened:
    checkpoint: Checkpoint
    body: str
    signatures: list[Signature]
    cosigned_by: dict[str, int]  # witness name -> the time it cosigned


def open_checkpoint(note: str, log: Verifier, witnesses: Iterable[Verifier] = ()) -> Opened:
    """Check a signed checkpoint: the log's signature must verify and its origin
    be the log key's name; each witness whose cosignature verifies is listed."""
    body, signatures = split(note)
    checkpoint = parse_checkpoint(body)
    if checkpoint.origin != log.name:
        raise NoteError(f"the checkpoint's origin {checkpoint.origin!r} is not the log "
                        f"{log.name!r}")
    if not any(log.verify(body, s) is not None for s in signatures):
        raise NoteError(f"the checkpoint carries no valid signature of {log.name}")
    cosigned: dict[str, int] = {}
    for witness in witnesses:
        for s in signatures:
            when = witness.verify(body, s)
            if when is not None:
                cosigned[witness.name] = when
    return Opened(checkpoint, body, signatures, cosigned)

"""C2SP tlog-witness ``add-checkpoint``: the request both sides write and read,
and ``wakeledger-verify witness --serve``, a witness any log can push to.

The log POSTs ``<submission prefix>/add-checkpoint`` with ``old <size>``, up to
63 consistency proof lines (base64 hashes), an empty line and its signed
checkpoint. The witness answers 200 with its cosignature lines, or 409
(``text/x.tlog.size``: the size it holds) when ``old`` is not that size, 404
for an origin it does not know, 403 when no trusted log key signed it, 400
for a malformed request and 422 for a proof that does not verify. Every
status and its order below are the spec's (https://c2sp.org/tlog-witness).

The server keeps, per origin, the size, root and checkpoint it last cosigned
in one JSON file (mode 0600), checked and replaced under one lock: two
requests racing cannot roll the witness back (the spec's own warning). It
also serves ``GET /<sha256(origin) hex>/checkpoint``, the newest cosigned
checkpoint, for monitors. Standard library and ``cryptography`` only.
"""

import argparse
import base64
import binascii
import contextlib
import hashlib
import json
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.mldsa import MLDSA44PrivateKey

from wakeledger_verify import merkle, notes
from wakeledger_verify.witness import _write_private, witness_key

MAX_PROOF_LINES = 63  # "The client MUST NOT send more than 63 consistency proof lines."
MAX_BODY = 64 * 1024  # a checkpoint, 63 hashes and 100 signatures fit many times over
SIZE_TYPE = "text/x.tlog.size"


class RequestError(ValueError):
    """An add-checkpoint request the witness refuses: the HTTP status and why."""

    def __init__(self, status: int, message: str, *, size: int | None = None) -> None:
        super().__init__(message)
        self.status, self.size = status, size


@dataclass(frozen=True)
class Request:
    old: int
    proof: list[bytes]
    note: str


def format_request(old: int, proof: Sequence[bytes], note: str) -> bytes:
    """The body a log POSTs: ``old N``, the proof's hashes, an empty line, the note."""
    lines = [f"old {old}\n"] + [base64.b64encode(h).decode() + "\n" for h in proof]
    return ("".join(lines) + "\n" + note).encode()


def _decimal(text: str) -> int | None:
    # "ASCII decimal with no leading zeroes (unless the size is zero)"
    if not text.isascii() or not text.isdigit() or (text != "0" and text[0] == "0"):
        return None
    return int(text)


def parse_request(body: bytes) -> Request:
    """The spec's request grammar; RequestError(400) for anything else."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise RequestError(400, "the request is not UTF-8") from None
    head, sep, note = text.partition("\n\n")
    if not sep:
        raise RequestError(400, "no empty line between the proof and the checkpoint")
    lines = head.split("\n")
    old = _decimal(lines[0][4:]) if lines[0].startswith("old ") else None
    if old is None:
        raise RequestError(400, "the first line is not 'old <size>'")
    if len(lines) - 1 > MAX_PROOF_LINES:
        raise RequestError(400, f"more than {MAX_PROOF_LINES} consistency proof lines")
    proof = []
    for line in lines[1:]:
        try:
            digest = base64.b64decode(line, validate=True)
        except binascii.Error:
            digest = b""
        if len(digest) != 32:
            raise RequestError(400, "a consistency proof line is not a base64 SHA-256 hash")
        proof.append(digest)
    return Request(old, proof, note)


def parse_size(body: bytes) -> int:
    """A 409's ``text/x.tlog.size`` body: the size the witness holds."""
    text = body.decode("ascii", errors="replace")
    size = _decimal(text[:-1]) if text.endswith("\n") else None
    if size is None:
        raise ValueError(f"not a text/x.tlog.size body: {text[:40]!r}")
    return size


# ------------------------------------------------------------------ the log's side


@dataclass(frozen=True)
class Configured:
    url: str  # the submission prefix; add-checkpoint is below it
    key: notes.Verifier

    @property
    def name(self) -> str:
        return self.key.name


def parse(entries: list[str]) -> list[Configured]:
    """``<submission prefix URL> <cosigner vkey>`` per entry (settings check it at start)."""
    found = []
    for entry in entries:
        url, _, vkey = entry.strip().partition(" ")
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{url!r} is not an http(s) submission prefix")
        found.append(Configured(url.rstrip("/"), cosigner_key(vkey)))
    return found


def refused_settings(origin: str, witness_keys: list[str], tlog_witnesses: list[str]
                     ) -> str | None:
    """What is wrong with the log's note settings, naming the setting; None if nothing."""
    checks = [("WAKELEDGER_LOG_ORIGIN", lambda: notes.check_name(origin)),
              ("WAKELEDGER_WITNESS_KEYS", lambda: [cosigner_key(k) for k in witness_keys]),
              ("WAKELEDGER_TLOG_WITNESSES", lambda: parse(tlog_witnesses))]
    for name, check in checks:
        try:
            check()
        except ValueError as error:  # NoteError is one
            return f"{name}: {error}"
    return None


def cosigner_key(vkey: str) -> notes.Verifier:
    """A witness's verifier key: cosignature/v1 (Ed25519) or ML-DSA-44, not a log's."""
    key = notes.parse_verifier(vkey.strip())
    if key.algorithm not in (notes.COSIGNATURE_V1, notes.ML_DSA_44):
        raise notes.NoteError(f"{key.name}: not a cosigner key (cosignature/v1 or ML-DSA-44)")
    return key



# ------------------------------------------------------------------ the witness


@dataclass(frozen=True)
class Held:
    size: int
    root: bytes
    checkpoint: str  # the note with the log's signatures and this witness's cosignatures


class Witness:
    """The checks, in the spec's order, and the state they guard."""

    def __init__(self, name: str, key: Ed25519PrivateKey | MLDSA44PrivateKey,
                 logs: Sequence[notes.Verifier], state: Path) -> None:
        self.name, self.key, self.path = name, key, state
        self.logs: dict[str, list[notes.Verifier]] = {}
        for log in logs:
            self.logs.setdefault(log.name, []).append(log)
        self.lock = threading.Lock()
        self.held = self._load()

    def verifier(self) -> notes.Verifier:
        algorithm = notes.ML_DSA_44 if isinstance(self.key, MLDSA44PrivateKey) \
            else notes.COSIGNATURE_V1
        return notes.verifier(self.name, self.key.public_key(), algorithm)

    def _load(self) -> dict[str, Held]:
        if not self.path.exists():
            return {}
        data = json.loads(self.path.read_text(encoding="utf-8"))
        return {origin: Held(int(v["size"]), bytes.fromhex(v["root"]), v["checkpoint"])
                for origin, v in data.items()}

    def _save(self) -> None:
        data = {origin: {"size": h.size, "root": h.root.hex(), "checkpoint": h.checkpoint}
                for origin, h in self.held.items()}
        _write_private(self.path, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())

    def _cosign(self, body: str) -> notes.Signature:
        now = int(time.time())  # "the timestamp MUST NOT be zero"
        if isinstance(self.key, MLDSA44PrivateKey):
            return notes.cosign_ml_dsa_44(body, self.name, self.key, now)
        return notes.cosign(body, self.name, self.key, now)

    def add_checkpoint(self, raw: bytes) -> str:
        """The cosignature lines for a valid request; RequestError otherwise."""
        request = parse_request(raw)
        try:
            body, signatures = notes.split(request.note)
            checkpoint = notes.parse_checkpoint(body)
        except notes.NoteError as error:
            raise RequestError(400, f"not a signed checkpoint: {error}") from None
        trusted = self.logs.get(checkpoint.origin)
        if trusted is None:
            raise RequestError(404, f"unknown log origin {checkpoint.origin!r}")
        # Signatures from unknown keys are ignored; one that names a trusted
        # key but fails makes the note malformed (signed-note): both are 403.
        verified, forged = False, False
        for signature in signatures:
            for log in trusted:
                if signature.name == log.name and signature.key_hash == log.key_hash:
                    if log.verify(body, signature) is None:
                        forged = True
                    else:
                        verified = True
        if forged or not verified:
            raise RequestError(403, "no valid signature of a trusted key for this origin")
        if request.old > checkpoint.size:
            raise RequestError(400, "the old size is larger than the checkpoint's")
        with self.lock:  # the check and the write are one step (the spec's race)
            held = self.held.get(checkpoint.origin)
            size = held.size if held else 0
            if request.old != size:
                raise RequestError(409, f"this witness holds size {size}", size=size)
            if checkpoint.size == 0 and checkpoint.root != merkle.EMPTY_ROOT:
                raise RequestError(422, "a checkpoint of size zero has the empty tree's root")
            if request.old == 0:
                if request.proof:
                    raise RequestError(422, "a proof from size zero must be empty")
            elif held is not None and request.old == checkpoint.size:
                if checkpoint.root != held.root or request.proof:
                    raise RequestError(422, "the same size as held, with another root hash")
            elif held is None or not merkle.consistent(held.size, held.root, checkpoint.size,
                                                       checkpoint.root, request.proof):
                raise RequestError(422, "the consistency proof does not verify")
            mine = self._cosign(body)
            logs = "".join(s.line() for s in signatures for log in trusted
                           if log.verify(body, s) is not None)
            self.held[checkpoint.origin] = Held(checkpoint.size, checkpoint.root,
                                                body + "\n" + logs + mine.line())
            self._save()  # persisted before the answer, as the spec requires
        return mine.line()

    def checkpoint(self, origin_hash: str) -> str | None:
        with self.lock:
            for origin, held in self.held.items():
                if hashlib.sha256(origin.encode()).hexdigest() == origin_hash:
                    return held.checkpoint
        return None


def handler(witness: Witness, prefix: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the spec asks of witnesses
        timeout = 30  # seconds a kept-alive or slow connection may idle before it is closed
        server_version = "wakeledger-witness"

        def _answer(self, status: int, text: str, content_type: str = "text/plain") -> None:
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type + "; charset=utf-8"
                             if content_type == "text/plain" else content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            if self.path != prefix + "/add-checkpoint":
                self._answer(404, "not found\n")
                return
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                self._answer(411, "a Content-Length is needed\n")
                self.close_connection = True
                return
            if not 0 <= length <= MAX_BODY:
                self._answer(413, "the request is too large\n")
                self.close_connection = True
                return
            try:
                lines = witness.add_checkpoint(self.rfile.read(length))
            except RequestError as error:
                if error.status == 409:
                    self._answer(409, f"{error.size}\n", SIZE_TYPE)
                else:
                    self._answer(error.status, f"{error}\n")
                return
            self._answer(200, lines)

        def do_GET(self) -> None:
            origin_hash = self.path.removeprefix(prefix + "/").removesuffix("/checkpoint")
            found = witness.checkpoint(origin_hash) if self.path.endswith("/checkpoint") \
                else None
            if found is None:
                self._answer(404, "this witness has cosigned no checkpoint of that log\n")
            else:
                self._answer(200, found)

        def _refuse(self) -> None:
            self._answer(405, "add-checkpoint is a POST\n")

        do_PUT = do_DELETE = do_PATCH = _refuse

        def log_message(self, format: str, *args: object) -> None:
            sys.stderr.write(f"witness: {self.address_string()} {format % args}\n")

    return Handler


def load_key(path: Path, ml_dsa: bool) -> Ed25519PrivateKey | MLDSA44PrivateKey:
    """The witness's key: Ed25519 (cosignature/v1) or ML-DSA-44, PEM, created 0600."""
    if not ml_dsa:
        return witness_key(path)
    if not path.exists():
        with contextlib.suppress(FileExistsError):
            _write_private(path, MLDSA44PrivateKey.generate().private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption()), exclusive=True)
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, MLDSA44PrivateKey):
        raise ValueError(f"{path} is not an ML-DSA-44 private key")
    return key


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="wakeledger-verify witness --serve",
        description="Serve C2SP tlog-witness add-checkpoint: logs push their checkpoints "
                    "with a consistency proof; each one that extends what this witness "
                    "cosigned before is cosigned.")
    parser.add_argument("--serve", required=True, metavar="HOST:PORT",
                        help="where to listen, e.g. 127.0.0.1:8040 (put TLS in front)")
    parser.add_argument("--prefix", default="", help="the submission prefix's path, e.g. "
                                                     "/witness (default: none)")
    parser.add_argument("--key", required=True, help="this witness's private key (PEM; "
                                                     "created 0600 if absent)")
    parser.add_argument("--name", required=True, help="this witness's key name")
    parser.add_argument("--ml-dsa", action="store_true",
                        help="cosign with ML-DSA-44 (post-quantum) instead of Ed25519")
    parser.add_argument("--log-key", action="append", default=[], required=True,
                        help="a log's note verifier key; its name is the origin (repeatable)")
    parser.add_argument("--state", required=True, help="the file of what was cosigned, per "
                                                       "log (created 0600)")
    parser.add_argument("--print-key", action="store_true",
                        help="print this witness's verifier key and exit")
    args = parser.parse_args(argv)
    try:
        key = load_key(Path(args.key), args.ml_dsa)
        logs = [notes.parse_verifier(text) for text in args.log_key]
        if any(log.algorithm != notes.ED25519 for log in logs):
            parser.error("--log-key is a log's Ed25519 note key (`ledger key --note`)")
        witness = Witness(notes.check_name(args.name), key, logs, Path(args.state))
        if args.print_key:
            print(witness.verifier().text())
            return 0
        host, _, port = args.serve.rpartition(":")
        server = ThreadingHTTPServer((host, int(port)), handler(witness,
                                                                args.prefix.rstrip("/")))
    except (OSError, ValueError) as error:
        print(f"wakeledger-verify witness: {error}", file=sys.stderr)
        return 1
    print(f"serving add-checkpoint on http://{host}:{server.server_address[1]}"
          f"{args.prefix.rstrip('/')}/add-checkpoint as {witness.verifier().text()}",
          flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0

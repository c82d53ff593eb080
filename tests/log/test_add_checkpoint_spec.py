"""``wakeledger-verify witness --serve`` against the text of C2SP tlog-witness
and tlog-cosignature (c2sp.org): their examples, and one test per status the
spec names. The trees, proofs and signed messages here are built with
hashlib and ``cryptography`` from the spec's and RFC 6962's definitions, not
with the code under test; each expected status quotes the sentence that asks
for it.
"""

# ruff: noqa: E501 -- the spec's examples are quoted as they are, long lines and all

import base64
import hashlib
import struct
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.mldsa import MLDSA44PrivateKey

from wakeledger_verify import add_checkpoint, cli, notes

# --------------------------------------------------------------- the spec's examples

EXAMPLE_REQUEST = """old 20852014
PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=
jrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=
5+pKlUdi2LeF/BcMHBn+Ku6yhPGNCswZZD1X/6QgPd8=
/6WVhPs2CwSsb5rYBH5cjHV/wSmA79abXAwhXw3Kj/0=

example.com/behind-the-sofa
20852163
CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=

— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=
— example.com/behind-the-sofa opLqBQsREYCgu6xQkYQwJr9fo45a62DN9EdmHXnZdXNqlcVGlCum2Wks+49/V6267UEjw6QUXTS5Rovnzv++qbSzm9Q=
"""

EXAMPLE_COSIGNED = """example.com/behind-the-sofa
20852163
CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=

— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=
— witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==
"""

EXAMPLE_SIGNED_MESSAGE = """cosignature/v1
time 1679315147
example.com/behind-the-sofa
20852163
CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=
"""


def test_the_specs_example_request_reads_as_old_size_proof_and_checkpoint():
    request = add_checkpoint.parse_request(EXAMPLE_REQUEST.encode())
    assert request.old == 20852014
    assert [base64.b64encode(h).decode() for h in request.proof] == \
        EXAMPLE_REQUEST.split("\n")[1:5]
    body, signatures = notes.split(request.note)
    checkpoint = notes.parse_checkpoint(body)
    assert (checkpoint.origin, checkpoint.size) == ("example.com/behind-the-sofa", 20852163)
    assert len(signatures) == 2


def test_the_specs_example_cosignature_is_timestamped_as_its_signed_message_says():
    body, signatures = notes.split(EXAMPLE_COSIGNED)
    cosignature = signatures[1]
    assert cosignature.name == "witness.example.com/w1"
    assert len(cosignature.signature) == 8 + 64  # timestamp, then Ed25519
    assert struct.unpack(">Q", cosignature.signature[:8])[0] == 1679315147
    assert notes.cosigned_message(body, 1679315147).decode() == EXAMPLE_SIGNED_MESSAGE


# --------------------------------------------------------------- a tree by RFC 6962


def leaf(i: int) -> bytes:
    return hashlib.sha256(b"\x00" + f"record {i}".encode()).digest()


def node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


ROOT = {1: leaf(0), 2: node(leaf(0), leaf(1)), 3: node(node(leaf(0), leaf(1)), leaf(2)),
        4: node(node(leaf(0), leaf(1)), node(leaf(2), leaf(3)))}
EMPTY = hashlib.sha256(b"").digest()  # "the hash of the empty string"
# RFC 6962 2.1.2's PROOF(m, D[n]), worked by hand for these sizes.
PROOF = {(2, 3): [leaf(2)], (2, 4): [node(leaf(2), leaf(3))],
         (3, 4): [leaf(2), leaf(3), node(leaf(0), leaf(1))]}

ORIGIN = "example.com/behind-the-sofa"


def checkpoint_text(size: int, root: bytes, origin: str = ORIGIN) -> str:
    return f"{origin}\n{size}\n{base64.b64encode(root).decode()}\n"


def sign_note(text: str, key: Ed25519PrivateKey, name: str = ORIGIN) -> str:
    """A signed note (C2SP signed-note) by hand: key ID SHA-256(name || 0x0A || 0x01 || key)[:4]."""
    raw = key.public_key().public_bytes_raw()
    key_id = hashlib.sha256(name.encode() + b"\n\x01" + raw).digest()[:4]
    signature = base64.b64encode(key_id + key.sign(text.encode())).decode()
    return f"{text}\n\u2014 {name} {signature}\n"


def vkey(name: str, algorithm: int, raw: bytes) -> str:
    key_id = hashlib.sha256(name.encode() + b"\n" + bytes([algorithm]) + raw).digest()[:4]
    return f"{name}+{key_id.hex()}+{base64.b64encode(bytes([algorithm]) + raw).decode()}"


def body(old: int, proof: list[bytes], note: str) -> bytes:
    return (f"old {old}\n" + "".join(base64.b64encode(h).decode() + "\n" for h in proof)
            + "\n" + note).encode()


class Served:
    def __init__(self, tmp: Path, ml_dsa: bool = False) -> None:
        self.log_key = Ed25519PrivateKey.generate()
        self.log_vkey = vkey(ORIGIN, 0x01, self.log_key.public_key().public_bytes_raw())
        self.state, self.key = tmp / "state.json", tmp / "witness.pem"
        self.ml_dsa = ml_dsa
        self.start()

    def start(self) -> None:
        key = add_checkpoint.load_key(self.key, self.ml_dsa)
        self.witness = add_checkpoint.Witness(
            "witness.example/w1", key, [notes.parse_verifier(self.log_vkey)], self.state)
        server = add_checkpoint.ThreadingHTTPServer(
            ("127.0.0.1", 0), add_checkpoint.handler(self.witness, ""))
        self.server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def signed(self, size: int, root: bytes | None = None) -> str:
        return sign_note(checkpoint_text(size, ROOT.get(size, EMPTY) if root is None
                                         else root), self.log_key)

    def post(self, data: bytes, path: str = "/add-checkpoint") -> tuple[int, str, str]:
        request = urllib.request.Request(self.url + path, data=data, method="POST")  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
                return answer.status, answer.headers["Content-Type"], answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.headers["Content-Type"], error.read().decode()


@pytest.fixture
def served(tmp_path):
    witness = Served(tmp_path)
    yield witness
    witness.stop()


def test_a_valid_request_is_answered_with_the_witness_cosignature_lines(served):
    status, _, answer = served.post(body(0, [], served.signed(2)))
    # "The response body MUST be a sequence of one or more note signature lines,
    # each starting with the — character (U+2014) and ending with a newline."
    assert status == 200
    assert answer.startswith("\u2014 witness.example/w1 ") and answer.endswith("\n")
    raw = base64.b64decode(answer.split(" ")[-1])
    timestamp = struct.unpack(">Q", raw[4:12])[0]
    assert timestamp != 0  # "the timestamp MUST NOT be zero"
    # The cosignature/v1 statement, checked with the witness's public key.
    public = add_checkpoint.load_key(served.key, False).public_key()
    public.verify(raw[12:], f"cosignature/v1\ntime {timestamp}\n".encode()
                  + checkpoint_text(2, ROOT[2]).encode())
    status, _, _ = served.post(body(2, PROOF[(2, 4)], served.signed(4)))
    assert status == 200


def test_a_wrong_old_size_is_409_naming_the_size_held_as_text_x_tlog_size(served):
    assert served.post(body(0, [], served.signed(2)))[0] == 200
    # "If it doesn't match, the witness MUST respond with a 409 Conflict ... the
    # tree size of the latest cosigned checkpoint in decimal, followed by a
    # newline ... a Content-Type of text/x.tlog.size."
    assert served.post(body(0, [], served.signed(3))) == (409, "text/x.tlog.size", "2\n")
    assert served.post(body(3, PROOF[(3, 4)], served.signed(4))) == (
        409, "text/x.tlog.size", "2\n")


def test_the_witness_persists_what_it_cosigned_before_answering(served):
    assert served.post(body(0, [], served.signed(3)))[0] == 200
    served.stop()
    served.start()  # a new process on the same state file
    assert served.post(body(0, [], served.signed(4)))[:2] == (409, "text/x.tlog.size")
    assert served.post(body(3, PROOF[(3, 4)], served.signed(4)))[0] == 200


def test_an_unknown_origin_is_404(served):
    stranger = Ed25519PrivateKey.generate()
    note = sign_note(checkpoint_text(2, ROOT[2], "other.example/log"), stranger,
                     "other.example/log")
    assert served.post(body(0, [], note))[0] == 404


def test_no_trusted_signature_or_a_failing_one_is_403(served):
    # "MUST ignore signatures from unknown keys" -- and then none is trusted.
    impostor = sign_note(checkpoint_text(2, ROOT[2]), Ed25519PrivateKey.generate())
    assert served.post(body(0, [], impostor))[0] == 403
    # "a signature line's key name and ID match a trusted key but the signature
    # itself fails to verify" -- even beside a good one.
    good = served.signed(2)
    line = good.rstrip("\n").rsplit("\n", 1)[1]
    name_and_id, encoded = line.rsplit(" ", 1)
    raw = bytearray(base64.b64decode(encoded))
    raw[-1] ^= 1
    bent = f"{name_and_id} {base64.b64encode(bytes(raw)).decode()}\n"
    assert served.post(body(0, [], good + bent))[0] == 403
    assert served.post(body(0, [], good))[0] == 200


@pytest.mark.parametrize("data", [
    b"old 3\n\n",  # old above the checkpoint's size (below)
    b"old 01\n\n",  # "no leading zeroes"
    b"old -1\n\n",
    b"old 1\nnot base64!\n\n",
    b"old 1\n" + b"AAAA\n" + b"\n",  # not a hash
    b"new 0\n\n",
    b"old 0\n",  # no empty line
    b"\xff\xfe\n\n",
], ids=["old-above-size", "leading-zero", "negative", "proof-not-base64", "proof-short",
        "no-old-line", "no-empty-line", "not-utf8"])
def test_a_malformed_request_is_400(served, data):
    note = served.signed(2).encode() if data.endswith(b"\n\n") else b""
    assert served.post(data + note)[0] == 400


def test_more_than_63_proof_lines_is_400(served):
    assert served.post(body(0, [EMPTY] * 64, served.signed(2)))[0] == 400


def test_bad_proofs_and_roots_are_422(served):
    # "A checkpoint of size zero MUST have the root hash of the empty tree"
    assert served.post(body(0, [], served.signed(0, ROOT[2])))[0] == 422
    # "If the proof is not empty when the old size is zero"
    assert served.post(body(0, PROOF[(2, 3)], served.signed(3)))[0] == 422
    assert served.post(body(0, [], served.signed(2)))[0] == 200
    # "if a Merkle Consistency Proof doesn't verify"
    assert served.post(body(2, [leaf(3)], served.signed(3)))[0] == 422
    assert served.post(body(2, PROOF[(2, 4)], served.signed(3)))[0] == 422
    # "If the old size matches the checkpoint size ... root hashes ... identical"
    assert served.post(body(2, [], served.signed(2, ROOT[3])))[0] == 422
    assert served.post(body(2, [], served.signed(2)))[0] == 200
    assert served.post(body(2, PROOF[(2, 3)], served.signed(3)))[0] == 200


def test_the_monitoring_checkpoint_carries_the_log_and_witness_signatures(served):
    origin_hash = hashlib.sha256(ORIGIN.encode()).hexdigest()
    request = urllib.request.Request(f"{served.url}/{origin_hash}/checkpoint")  # noqa: S310
    with pytest.raises(urllib.error.HTTPError) as never:  # "never cosigned ... 404"
        urllib.request.urlopen(request, timeout=10)  # noqa: S310
    assert never.value.code == 404
    assert served.post(body(0, [], served.signed(2)))[0] == 200
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
        note = answer.read().decode()
    opened = notes.open_checkpoint(note, notes.parse_verifier(served.log_vkey),
                                   [served.witness.verifier()])
    assert opened.checkpoint.size == 2 and "witness.example/w1" in opened.cosigned_by


def test_an_ml_dsa_44_witness_signs_the_specs_cosigned_message(tmp_path):
    served = Served(tmp_path, ml_dsa=True)
    try:
        status, _, answer = served.post(body(0, [], served.signed(3)))
    finally:
        served.stop()
    assert status == 200
    key = add_checkpoint.load_key(served.key, True)
    assert isinstance(key, MLDSA44PrivateKey)
    public = key.public_key().public_bytes_raw()
    assert len(public) == 1312
    raw = base64.b64decode(answer.rstrip("\n").split(" ")[-1])
    # "SHA-256(<name> || "\n" || 0x06 || 1312-byte ML-DSA-44 cosigner public key)[:4]"
    name = b"witness.example/w1"
    assert raw[:4] == hashlib.sha256(name + b"\n\x06" + public).digest()[:4]
    timestamp = struct.unpack(">Q", raw[4:12])[0]
    assert len(raw) == 4 + 8 + 2420 and timestamp != 0
    message = (b"subtree/v1\n\0" + bytes([len(name)]) + name + struct.pack(">Q", timestamp)
               + bytes([len(ORIGIN)]) + ORIGIN.encode() + struct.pack(">QQ", 0, 3)
               + ROOT[3])
    key.public_key().verify(raw[12:], message)
    # And the verifier key as the spec encodes it (type 0x06) checks it.
    verifier = notes.parse_verifier(vkey("witness.example/w1", 0x06, public))
    assert verifier.verify(checkpoint_text(3, ROOT[3]), notes.split(
        served.signed(3) + answer)[1][1]) == timestamp


def test_the_command_serves_and_prints_its_key(tmp_path, capsys):
    log = vkey(ORIGIN, 0x01, Ed25519PrivateKey.generate().public_key().public_bytes_raw())
    args = ["witness", "--serve", "127.0.0.1:0", "--key", str(tmp_path / "k.pem"),
            "--name", "witness.example/w1", "--log-key", log, "--state",
            str(tmp_path / "s.json"), "--print-key"]
    assert cli.main(args) == 0
    printed = capsys.readouterr().out.strip()
    assert notes.parse_verifier(printed).algorithm == notes.COSIGNATURE_V1
    assert cli.main([*args, "--ml-dsa", "--key", str(tmp_path / "m.pem")]) == 0
    assert notes.parse_verifier(capsys.readouterr().out.strip()).algorithm == notes.ML_DSA_44

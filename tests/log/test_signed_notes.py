"""C2SP signed notes, checkpoints and cosignatures (wakeledger_verify/notes.py)
as properties: what is signed opens, anything changed does not, and keys and
lines have the shapes Go's sumdb/note reads (tests/log/test_checkpoint_interop.py
checks that against Go itself)."""

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from wakeledger_verify import notes

KEY = Ed25519PrivateKey.generate()
WITNESS = Ed25519PrivateKey.generate()
_NAME = st.text(st.characters(blacklist_categories=["Z", "C"], blacklist_characters="+"),
                min_size=1, max_size=30)


def signed(origin: str, size: int, root: bytes) -> str:
    body = notes.Checkpoint(origin, size, root).body()
    return notes.format_note(body, [notes.sign(body, origin, KEY)])


@settings(max_examples=200, deadline=None)
@given(_NAME, st.integers(min_value=0, max_value=2**63), st.binary(min_size=32, max_size=32),
       st.integers(min_value=0, max_value=2**40))
def test_a_signed_cosigned_checkpoint_opens_and_says_what_was_signed(origin, size, root, when):
    log = notes.verifier(origin, KEY.public_key())
    assert notes.parse_verifier(log.text()) == log
    note = signed(origin, size, root)
    body = notes.split(note)[0]
    witness = notes.verifier("w.example/a", WITNESS.public_key(), notes.COSIGNATURE_V1)
    note += notes.cosign(body, "w.example/a", WITNESS, when).line()
    opened = notes.open_checkpoint(note, log, [witness])
    assert opened.checkpoint == notes.Checkpoint(origin, size, root)
    assert opened.cosigned_by == {"w.example/a": when}


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=2**40), st.binary(min_size=32, max_size=32),
       st.data())
def test_any_change_to_the_body_breaks_the_signature(size, root, data):
    log = notes.verifier("log.example/x", KEY.public_key())
    note = signed("log.example/x", size, root)
    body = notes.split(note)[0]
    at = data.draw(st.integers(min_value=len("log.example/x\n"), max_value=len(body) - 2))
    replacement = data.draw(st.sampled_from("0123456789ABCDEFabcdef+/="))
    if body[at] == replacement:
        return
    changed = body[:at] + replacement + body[at + 1:] + note[len(body):]
    with pytest.raises(notes.NoteError):
        notes.open_checkpoint(changed, log)


def test_key_hashes_and_lines_follow_the_signed_note_format():
    raw = KEY.public_key().public_bytes_raw()
    log = notes.verifier("log.example/x", KEY.public_key())
    assert log.key_hash == hashlib.sha256(b"log.example/x\n\x01" + raw).digest()[:4]
    name, key_hash, key = log.text().split("+", 2)
    assert (name, key_hash, base64.b64decode(key)) == ("log.example/x", log.key_hash.hex(),
                                                       b"\x01" + raw)
    line = notes.sign("x\n", "log.example/x", KEY).line()
    assert line.startswith("\u2014 log.example/x ") and line.endswith("\n")
    assert len(base64.b64decode(line.split()[-1])) == 4 + 64
    cosig = notes.cosign("x\n", "w", WITNESS, 7).signature
    assert cosig[:8] == (7).to_bytes(8, "big") and len(cosig) == 72


@pytest.mark.parametrize("bad", ["", "a+b", "a b", "tab\there"])
def test_a_key_name_is_non_empty_without_plus_or_space(bad):
    with pytest.raises(notes.NoteError):
        notes.verifier(bad, KEY.public_key())


@pytest.mark.parametrize("note", [
    "log\n1\nAAAA\n",  # no signature block
    "log\n1\n" + base64.b64encode(b"\0" * 32).decode() + "\n\nnot a signature\n",
    "log\n01\n" + base64.b64encode(b"\0" * 32).decode() + "\n\n\u2014 log AAAAAAAA\n",
    "log\n1\n" + base64.b64encode(b"\0" * 31).decode() + "\n\n\u2014 log AAAAAAAA\n",
])
def test_what_is_not_a_checkpoint_is_refused(note):
    with pytest.raises(notes.NoteError):
        notes.open_checkpoint(note, notes.verifier("log", KEY.public_key()))


def test_a_verifier_key_whose_hash_does_not_match_is_refused():
    _, key_hash, key = notes.verifier("log", KEY.public_key()).text().split("+", 2)
    with pytest.raises(notes.NoteError, match="hash does not match"):
        notes.parse_verifier(f"other+{key_hash}+{key}")


# ------------------------------------------------------------------ an export's multi-proof


def _bundle_over(size: int, positions: list[int]) -> tuple[dict, dict]:
    """A signed bundle of one goal whose events sit at ``positions`` in a tree
    of ``size`` leaves (the others stand-ins), and every stored node."""
    from wakeledger_verify import BUNDLE_FORMAT, heads, merkle, records

    goal, previous, events = "g-1", records.GENESIS, []
    for seq, position in enumerate(positions, start=1):
        record = records.leaf_record(position, position + 1, goal, seq, "goal.checkpoint",
                                     {"n": seq}, "agent-1", "2026-12-08T00:00:00.000000Z",
                                     None, previous, "")
        record["hash"] = previous = records.chain_hash(record)
        events.append(record)
    by_position = {r["position"]: records.record_leaf_hash(r) for r in events}
    frontier, nodes = merkle.Frontier(), {}
    for position in range(size):
        nodes.update(frontier.append(by_position.get(position) or merkle.leaf_hash(
            position.to_bytes(4, "big"))))
    shipped = {key for p in positions for a, b in merkle.inclusion_ranges(p, size)
               for key in merkle.range_keys(a, b)}
    halves = {half for key in shipped for half in merkle.halves(key)} - shipped
    key = Ed25519PrivateKey.generate()
    head = {"size": size, "root": frontier.root().hex(), "timestamp": "2026-12-08T00:00:00Z",
            "key_id": heads.key_id(key.public_key()), "horizon": size}
    head["signature"] = base64.b64encode(key.sign(heads.signed_bytes(head))).decode()
    return {"format": BUNDLE_FORMAT, "goal": goal, "events": events, "head": head,
            "subtrees": {merkle.subtree_name(k): nodes[k].hex() for k in shipped},
            "halves": {merkle.subtree_name(k): nodes[k].hex() for k in halves},
            "public_keys": {head["key_id"]: heads.public_key_pem(key.public_key())}}, nodes


@settings(max_examples=60, deadline=None)
@given(size=st.integers(2, 70), data=st.data())
def test_a_wrong_stored_node_an_export_proves_with_is_named_by_the_offline_check(size, data):
    from wakeledger_verify import bundle as bundles

    positions = sorted(data.draw(st.sets(st.integers(0, size - 1), min_size=1, max_size=5)))
    exported, _ = _bundle_over(size, positions)
    assert bundles.check(exported).events == len(positions)
    nodes = sorted(name for name in exported["subtrees"] if not name.startswith("0/"))
    assume(nodes)
    wrong = data.draw(st.sampled_from(nodes))
    level, index = (int(part) for part in wrong.split("/"))
    exported["subtrees"][wrong] = "ab" * 32
    with pytest.raises(bundles.Failure) as failure:
        bundles.check(exported)
    assert (f"inclusion proof does not match root: the stored node {wrong} (leaves "
            f"{index << level} to {((index + 1) << level) - 1}) is wrong") in str(failure.value)

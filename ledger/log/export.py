"""``ledger export GOAL``: one JSON bundle an auditor checks offline with
``wakeledger-verify`` (wakeledger_verify/bundle.py says what it proves).

The bundle holds the goal's events (each as the exact record its leaf
hashes), the newest signed head, the subtree hashes that prove each event's
inclusion in that head's tree (one multi-proof, each hash once), consistency
proofs from earlier heads' sizes (so an auditor holding one of them can check
that this head extends it), and the public keys of the heads involved. Only
events the head covers are exported: a goal's events are sealed in seq order,
so they are always its first N.

Asked for witnesses (``cosigned_by``), the bundle takes the newest head all
of them cosigned instead: right after a seal the newest head has no
cosignature yet, and a bundle an auditor checks with ``--witness-key`` must
carry one.
"""

from collections.abc import Iterable, Sequence
from typing import Any

from ledger.domain import iso
from ledger.eventstore import clock
from ledger.log import cosigning, merkle_store
from ledger.models import Event, Goal, LogLeaf, SigningKey, TreeHead
from wakeledger_verify import BUNDLE_FORMAT, merkle, notes

EARLIER_HEADS = 100  # consistency proofs from this many earlier head sizes
COSIGNED_CANDIDATES = 100  # newest heads a witness's name is looked for among, per export


class NothingToExport(Exception):
    pass


def witness(text: str) -> notes.Verifier | str:
    """A witness as the export is asked for it: its note verifier key (its
    cosignature is then checked, not only its name) or its key name.
    NoteError if it is neither."""
    if "+" in text:
        return notes.parse_verifier(text)
    return notes.check_name(text)


def cosigned_head(witnesses: Sequence[notes.Verifier | str]) -> TreeHead | None:
    """The newest head every one of ``witnesses`` cosigned (a verifier key's
    cosignature checked under that key), or None."""
    heads = TreeHead.objects.exclude(checkpoint="")
    for one in witnesses:
        heads = heads.filter(cosignatures__witness=getattr(one, "name", one))
    for head in heads.order_by("-id").distinct()[:COSIGNED_CANDIDATES]:
        lines = dict(head.cosignatures.values_list("witness", "line"))
        if all(isinstance(one, str) or _cosigns(one, head.checkpoint, lines[one.name])
               for one in witnesses):
            return head
    return None


def _cosigns(witness: notes.Verifier, checkpoint: str, line: str) -> bool:
    """Whether the stored cosignature ``line`` is ``witness``'s on ``checkpoint``
    (a row is checked when kept, and read again here: the database is not trusted)."""
    try:
        body, signatures = notes.split(checkpoint + line)
    except notes.NoteError:
        return False
    return any(witness.verify(body, signature) is not None for signature in signatures)


def bundle(goal_id: str, *, from_sizes: Iterable[int] = (),
           cosigned_by: Sequence[notes.Verifier | str] = ()) -> dict[str, Any]:
    goal = Goal.objects.filter(pk=goal_id).values_list("version", flat=True).first()
    if goal is None:
        raise NothingToExport(f"no such goal: {goal_id}")
    head = TreeHead.objects.order_by("-id").first()
    if head is None:
        raise NothingToExport("no signed head yet: run `ledger seal` first")
    if cosigned_by:
        head = cosigned_head(cosigned_by)
        if head is None:
            names = ", ".join(getattr(one, "name", one) for one in cosigned_by)
            raise NothingToExport(f"no signed head is cosigned by {names} yet: wait for the "
                                  "witness's next poll")
    ids = list(Event.objects.filter(goal_id=goal_id).order_by("seq").values_list("id",
                                                                                  flat=True))
    positions = dict(LogLeaf.objects.filter(event_id__in=ids, position__lt=head.size)
                     .values_list("event_id", "position"))
    covered = [event_id for event_id in ids if event_id in positions]
    if not covered:
        raise NothingToExport(f"none of goal {goal_id}'s events is in the newest head yet: "
                              "run `ledger seal` first")
    rows = merkle_store.event_rows(covered)
    records = [merkle_store.record(positions[event_id], rows[event_id])
               for event_id in covered]
    subtrees = merkle_store.subtrees([r["position"] for r in records], head.size)
    halves = merkle_store.fetch(
        half for name in subtrees for half in merkle.halves(merkle.subtree_key(name))
        if merkle.subtree_name(half) not in subtrees)
    earlier = list(TreeHead.objects.filter(size__lt=head.size, size__gt=0).order_by("-id")
                   .values_list("size", "key_id")[:EARLIER_HEADS])
    sizes = {size for size, _ in earlier} | {s for s in from_sizes if 0 < s < head.size}
    key_ids = {head.key_id, *(key for _, key in earlier)}
    return {
        "format": BUNDLE_FORMAT,
        "goal": str(goal_id),
        "exported_at": iso(clock.now()),
        # What the goal row says now; not proven by the bundle (see the docs).
        "goal_version": goal,
        "events": records,
        # One multi-proof: the subtrees every event's inclusion path needs,
        # each once ("level/index": hash). Per-event paths would repeat the
        # upper nodes in every one of them.
        "subtrees": subtrees,
        # The two halves of each of those subtrees (level >= 1): not needed
        # for the proof, they let an offline check name a stored node that is
        # wrong (it is then not the hash of its halves) when a path fails.
        "halves": {merkle.subtree_name(key): digest.hex() for key, digest in halves.items()},
        "head": head.as_dict(),
        # The same head as a C2SP checkpoint with its witnesses' cosignatures
        # (null for a head signed before checkpoints existed).
        "checkpoint": cosigning.cosigned(head) if head.checkpoint else None,
        "consistency": {str(size): merkle_store.consistency(size, head.size)
                        for size in sorted(sizes)},
        "public_keys": dict(SigningKey.objects.filter(key_id__in=key_ids)
                            .values_list("key_id", "public_key")),
    }

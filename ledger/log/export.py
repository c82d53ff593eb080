"""``ledger export GOAL``: one JSON bundle an auditor checks offline with
``wakeledger-verify`` (wakeledger_verify/bundle.py says what it proves).

The bundle holds the goal's events (each as the exact record its leaf
hashes), the newest signed head, the subtree hashes that prove each event's
inclusion in that head's tree (one multi-proof, each hash once), consistency
proofs from earlier heads' sizes (so an auditor holding one of them can check
that this head extends it), and the public keys of the heads involved. Only
events the head covers are exported: a goal's events are sealed in seq order,
so they are always its first N.
"""

from collections.abc import Iterable
from typing import Any

from ledger.domain import iso
from ledger.eventstore import clock
from ledger.log import cosigning, merkle_store
from ledger.models import Event, Goal, LogLeaf, SigningKey, TreeHead
from wakeledger_verify import BUNDLE_FORMAT

EARLIER_HEADS = 100  # consistency proofs from this many earlier head sizes


class NothingToExport(Exception):
    pass


def bundle(goal_id: str, *, from_sizes: Iterable[int] = ()) -> dict[str, Any]:
    goal = Goal.objects.filter(pk=goal_id).values_list("version", flat=True).first()
    if goal is None:
        raise NothingToExport(f"no such goal: {goal_id}")
    head = TreeHead.objects.order_by("-id").first()
    if head is None:
        raise NothingToExport("no signed head yet: run `ledger seal` first")
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
        "head": head.as_dict(),
        # The same head as a C2SP checkpoint with its witnesses' cosignatures
        # (null for a head signed before checkpoints existed).
        "checkpoint": cosigning.cosigned(head) if head.checkpoint else None,
        "consistency": {str(size): merkle_store.consistency(size, head.size)
                        for size in sorted(sizes)},
        "public_keys": dict(SigningKey.objects.filter(key_id__in=key_ids)
                            .values_list("key_id", "public_key")),
    }

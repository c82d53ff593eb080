"""``ledger verify --against HEAD_FILE``: does the database still hold the log a
kept head signed, and does it hold nothing the tree does not account for?

Nothing stored is trusted except as the thing being checked: every leaf is
recomputed from its event as the database holds it now, the tree is rebuilt
from those leaves alone, and its roots are compared with the kept head (the
auditor's copy, outside the database) and with every stored head. The stored
subtrees (what the API's proofs are made of) are checked by a consistency
proof against the recomputed roots.
"""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.db.models import Exists, OuterRef

from ledger.log import merkle_store
from ledger.models import Event, LogLeaf, TreeHead
from wakeledger_verify import heads, merkle

_CHUNK = 2000
SHOWN = 5  # at most this many ids named per finding


@dataclass
class Audit:
    kept_size: int
    tree_size: int = 0
    root: str = ""
    heads_checked: int = 0
    findings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def audit(kept: dict[str, Any], keys: Iterable[Ed25519PublicKey]) -> Audit:
    """``kept`` is a head in the API's shape; ``keys`` the public keys to check
    signatures with (the server's own and any the auditor pins)."""
    problem = heads.head_shape_error(kept)
    if problem:
        raise ValueError(problem)
    by_id = {heads.key_id(key): key for key in keys}
    report = Audit(kept_size=kept["size"])
    _check_signature(kept, by_id, "the kept head", report)
    stored = list(TreeHead.objects.order_by("size", "id"))
    for head in stored:
        _check_signature(head.as_dict(), by_id, f"stored head {head.id}", report)
    roots = _recompute(report, {kept["size"], *(h.size for h in stored)})
    if report.tree_size < kept["size"]:
        report.findings.append(
            f"the log has {report.tree_size} leaves, fewer than the kept head's "
            f"{kept['size']}: it was truncated or rolled back")
    elif kept["size"] and roots.get(kept["size"]) != kept["root"]:
        report.findings.append(
            f"the log's first {kept['size']} leaves, recomputed from the events, have root "
            f"{roots.get(kept['size'])}; the kept head signs {kept['root']}: events it "
            "covers were changed, removed, reordered or inserted")
    for head in stored:
        if head.size <= report.tree_size and roots.get(head.size) != head.root:
            report.findings.append(
                f"stored head {head.id} (size {head.size}) signs root {head.root}, but the "
                f"events give {roots.get(head.size)}")
        report.heads_checked += 1
    _check_stored_nodes(report, kept, roots)
    _check_complete(report, stored, kept)
    return report


def _check_signature(head: dict[str, Any], keys: dict[str, Ed25519PublicKey], what: str,
                     report: Audit) -> None:
    key = keys.get(head["key_id"])
    if key is None:
        report.notes.append(f"{what} is signed by {head['key_id']}, a key not given here "
                            "(pass --key to check it)")
    elif not heads.signature_valid(head, key):
        report.findings.append(f"signature invalid for key {head['key_id']} ({what})")


def _recompute(report: Audit, sizes: set[int]) -> dict[int, str]:
    """Rebuild the tree from the events; the roots at ``sizes`` (those reached)."""
    frontier = merkle.Frontier()
    roots: dict[int, str] = {}
    if 0 in sizes:
        roots[0] = merkle.EMPTY_ROOT.hex()
    changed = missing = 0
    gap_reported = False
    for position, event_id, stored_hash, row in _leaves():
        if position != frontier.size and not gap_reported:
            # Leaves were removed: go on (each is still hashed with its own
            # position), so every later problem is named too; no root matches.
            report.findings.append(f"the tree's positions jump from {frontier.size - 1} "
                                   f"to {position}: leaves were removed")
            gap_reported = True
        if row is None:
            missing += 1
            if missing <= SHOWN:
                report.findings.append(f"leaf {position}: its event {event_id} is gone "
                                       "(deleted from the database)")
            # A placeholder no event hashes to: the tree's shape goes on, so
            # later positions are still checked, and no root can match.
            leaf = merkle.EMPTY_ROOT
        else:
            leaf = merkle_store.leaf(merkle_store.record(position, row))
            if leaf.hex() != stored_hash:
                changed += 1
                if changed <= SHOWN:
                    report.findings.append(
                        f"leaf {position}: event {event_id} (goal {row[1]}, seq {row[2]}) "
                        "no longer matches its leaf: it was changed after it was sealed")
        frontier.append(leaf)
        if frontier.size in sizes:
            roots[frontier.size] = frontier.root().hex()
    for count, what in ((changed, "changed"), (missing, "missing")):
        if count > SHOWN:
            report.findings.append(f"… {count} leaves with {what} events in all")
    report.tree_size, report.root = frontier.size, frontier.root().hex()
    return roots


def _leaves() -> Iterator[tuple[int, int, str, tuple[Any, ...] | None]]:
    """Every leaf in position order with its event row (None if it is gone),
    a chunk at a time: a log of millions of events never sits in memory."""
    after = -1
    while True:
        chunk = list(LogLeaf.objects.filter(position__gt=after).order_by("position")
                     .values_list("position", "event_id", "hash")[:_CHUNK])
        if not chunk:
            return
        rows = merkle_store.event_rows(event_id for _, event_id, _ in chunk)
        for position, event_id, digest in chunk:
            yield position, event_id, digest, rows.get(event_id)
        after = chunk[-1][0]


def _check_stored_nodes(report: Audit, kept: dict[str, Any], roots: dict[int, str]) -> None:
    """The proofs the API serves come from stored subtrees: they must prove
    that today's tree (as recomputed) extends the kept head."""
    first, second = kept["size"], report.tree_size
    if report.findings or not 0 < first <= second:
        return
    try:
        proof = [bytes.fromhex(h) for h in merkle_store.consistency(first, second)]
        served = merkle_store.root(second).hex()
    except merkle_store.TreeCorrupt as error:
        report.findings.append(f"the stored tree is damaged: {error}")
        return
    if served != report.root:
        report.findings.append(f"the stored tree's root {served} is not the recomputed "
                               f"{report.root}: its subtrees were altered")
    elif not merkle.consistent(first, bytes.fromhex(kept["root"]), second,
                               bytes.fromhex(report.root), proof):
        report.findings.append("the stored tree's consistency proof from the kept head "
                               "does not verify")


def _check_complete(report: Audit, stored: list[TreeHead], kept: dict[str, Any]) -> None:
    """Every event the newest head's horizon covers has a leaf; later events are
    merely not sealed yet."""
    # The kept head's horizon is signed and outside the database's reach; a
    # stored head's is signed too (a lowered one fails its signature above).
    horizon = max([kept["horizon"], *(head.horizon for head in stored)])
    outside = (Event.objects.filter(id__lte=horizon)
               .exclude(Exists(LogLeaf.objects.filter(event_id=OuterRef("id"))))
               .order_by("id").values_list("id", flat=True))
    ids = list(outside[:SHOWN + 1])
    if ids:
        shown = ", ".join(map(str, ids[:SHOWN])) + (" …" if len(ids) > SHOWN else "")
        report.findings.append(f"event(s) {shown} are older than the newest head (which "
                               f"covers every event up to id {horizon}) but not in the tree: "
                               "inserted behind the log's back")
    unsealed = Event.objects.filter(id__gt=horizon).count()
    if unsealed:
        report.notes.append(f"{unsealed} event(s) newer than the newest head are not sealed "
                            "yet (`ledger seal`)")

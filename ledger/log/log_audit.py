"""``ledger verify --against HEAD_FILE``: does the database still hold the log a
kept head signed, and does it hold nothing the tree does not account for?

Nothing stored is trusted except as the thing being checked: every leaf is
recomputed from its event as the database holds it now, the tree is rebuilt
from those leaves alone, and its roots are compared with every head held
outside the database (the auditor's kept head or checkpoint, cosigned or not;
the sealer's own record beside its key) and with every stored head. Every
stored subtree (what the API's proofs are made of) is recomputed from the
stored leaves: a corrupted one is named with its position. A head held outside
that no stored head matches was deleted; so were heads when leaves are stored
and no head is.
"""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.conf import settings
from django.db.models import Exists, OuterRef

from ledger.log import cosigning, merkle_store, sealer_state
from ledger.models import Event, LogLeaf, LogNode, TreeHead
from wakeledger_verify import heads, merkle, notes

_CHUNK = 2000
SHOWN = 5  # at most this many ids named per finding


@dataclass(frozen=True)
class Claim:
    """A (size, root) held outside the database: what the log must extend."""

    what: str
    size: int
    root: str
    horizon: int | None = None  # JSON heads sign one; checkpoints do not


@dataclass
class Audit:
    kept_size: int
    tree_size: int = 0
    root: str = ""
    heads_checked: int = 0
    findings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def audit(kept: dict[str, Any] | str, keys: Iterable[Ed25519PublicKey]) -> Audit:
    """``kept`` is a head in the API's shape or a checkpoint note (cosigned or
    not); ``keys`` the public keys to check signatures with (the server's own
    and any the auditor pins). The sealer's record, when this machine has it,
    is held to as well."""
    keys = list(keys)
    by_id = {heads.key_id(key): key for key in keys}
    claims: list[Claim] = []
    report = Audit(kept_size=0)
    if isinstance(kept, str):
        claims.append(_checkpoint_claim("the kept checkpoint", kept, keys, report))
    else:
        problem = heads.head_shape_error(kept)
        if problem:
            raise ValueError(problem)
        _check_signature(kept, by_id, "the kept head", report)
        claims.append(Claim("the kept head", kept["size"], kept["root"], kept["horizon"]))
    report.kept_size = claims[0].size
    record = sealer_state.read_note()
    if record is not None:
        claims.append(_checkpoint_claim("the sealer's record", record, keys, report,
                                        strict=False))
    stored = list(TreeHead.objects.order_by("size", "id"))
    for head in stored:
        _check_signature(head.as_dict(), by_id, f"stored head {head.id}", report)
    roots = _recompute(report, {c.size for c in claims} | {h.size for h in stored})
    for claim in claims:
        _check_claim(report, claim, roots, stored)
    for head in stored:
        if head.size <= report.tree_size and roots.get(head.size) != head.root:
            report.findings.append(
                f"stored head {head.id} (size {head.size}) signs root {head.root}, but the "
                f"events give {roots.get(head.size)}")
        report.heads_checked += 1
    if report.tree_size and not stored:
        report.findings.append(f"the tree has {report.tree_size} leaves but no signed head "
                               "is stored: the heads were deleted")
    _check_stored_nodes(report, claims[0], roots)
    _check_complete(report, stored, claims)
    return report


def _checkpoint_claim(what: str, note: str, keys: list[Ed25519PublicKey],
                      report: Audit, *, strict: bool = True) -> Claim:
    """A checkpoint's (size, root), its log signature checked with ``keys``
    (a kept note that none verifies is a finding; the sealer's own record,
    signed by a key rotated away until the next seal, only a note) and its
    cosignatures named."""
    try:
        body, _ = notes.split(note)
        checkpoint = notes.parse_checkpoint(body)
    except notes.NoteError as error:
        raise ValueError(f"{what} is not a checkpoint: {error}") from None
    claim = Claim(what, checkpoint.size, checkpoint.root.hex())
    if checkpoint.origin != settings.WAKELEDGER_LOG_ORIGIN:
        report.findings.append(f"{what} is of the log {checkpoint.origin!r}, not this one "
                               f"({settings.WAKELEDGER_LOG_ORIGIN!r})")
        return claim
    opened = None
    for key in keys:
        try:
            opened = notes.open_checkpoint(note, notes.verifier(checkpoint.origin, key),
                                           cosigning.witnesses())
            break
        except notes.NoteError:
            continue
    if opened is None:
        (report.findings if strict else report.notes).append(
            f"{what} carries no valid signature of a key given here")
    elif opened.cosigned_by:
        report.notes.append(f"{what} is cosigned by {', '.join(sorted(opened.cosigned_by))}")
    return claim


def _check_claim(report: Audit, claim: Claim, roots: dict[int, str],
                 stored: list[TreeHead]) -> None:
    if report.tree_size < claim.size:
        report.findings.append(
            f"the log has {report.tree_size} leaves, fewer than {claim.what}'s "
            f"{claim.size}: it was truncated or rolled back")
    elif claim.size and roots.get(claim.size) != claim.root:
        report.findings.append(
            f"the log's first {claim.size} leaves, recomputed from the events, have root "
            f"{roots.get(claim.size)}; {claim.what} signs {claim.root}: events it "
            "covers were changed, removed, reordered or inserted")
    if claim.size and not any(h.size == claim.size and h.root == claim.root for h in stored):
        report.findings.append(
            f"{claim.what} (size {claim.size}) is not among the stored heads: heads were "
            "deleted or replaced")


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
    # The nodes' check needs the tree of the *stored* leaf hashes. While every
    # recomputed leaf matches its stored hash the two trees are one, so the
    # second is only split off at the first leaf that differs.
    stored_tree: merkle.Frontier | None = None
    nodes = _NodeCheck(report)
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
        if stored_tree is None and leaf.hex() != stored_hash:
            stored_tree = frontier.copy()
        completed = frontier.append(leaf)
        nodes.add(completed if stored_tree is None
                  else stored_tree.append(bytes.fromhex(stored_hash)))
        if frontier.size in sizes:
            roots[frontier.size] = frontier.root().hex()
    nodes.flush()
    for count, what in ((changed, "changed"), (missing, "missing")):
        if count > SHOWN:
            report.findings.append(f"… {count} leaves with {what} events in all")
    report.tree_size, report.root = frontier.size, frontier.root().hex()
    return roots


class _NodeCheck:
    """Every stored subtree, compared with the one recomputed from the stored
    leaves, a chunk of keys at a time (one IN query each)."""

    def __init__(self, report: Audit) -> None:
        self.report, self.pending, self.bad = report, {}, 0

    def add(self, completed: list[tuple[merkle.Key, bytes]]) -> None:
        for key, digest in completed:
            if key[0] > 0:
                self.pending[key] = digest
        if len(self.pending) >= _CHUNK:
            self.flush()

    def flush(self) -> None:
        keys = {merkle_store.node_key(*key): key for key in self.pending}
        found = dict(LogNode.objects.filter(key__in=keys).values_list("key", "hash"))
        for packed, key in sorted(keys.items(), key=lambda item: item[1]):
            want, have = self.pending[key].hex(), found.get(packed)
            if have != want:
                self.bad += 1
                if self.bad <= SHOWN:
                    level, index = key
                    first, last = index << level, ((index + 1) << level) - 1
                    self.report.findings.append(
                        f"stored node {level}/{index} (leaves {first} to {last}) is "
                        f"{have or 'missing'}; the stored leaves give {want}: the proofs "
                        "served from it fail")
                elif self.bad == SHOWN + 1:
                    self.report.findings.append("… more stored nodes are wrong")
        self.pending = {}


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


def _check_stored_nodes(report: Audit, kept: Claim, roots: dict[int, str]) -> None:
    """The proofs the API serves come from stored subtrees: they must prove
    that today's tree (as recomputed) extends the kept head."""
    first, second = kept.size, report.tree_size
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
    elif not merkle.consistent(first, bytes.fromhex(kept.root), second,
                               bytes.fromhex(report.root), proof):
        report.findings.append("the stored tree's consistency proof from the kept head "
                               "does not verify")


def _check_complete(report: Audit, stored: list[TreeHead], claims: list[Claim]) -> None:
    """Every event the newest head's horizon covers has a leaf; later events
    without one are merely not sealed yet."""
    # A kept head's horizon is signed and outside the database's reach; a
    # stored head's is signed too (a lowered one fails its signature above).
    horizon = max([0, *(c.horizon for c in claims if c.horizon is not None),
                   *(head.horizon for head in stored)])
    leafless = Event.objects.exclude(Exists(LogLeaf.objects.filter(event_id=OuterRef("id"))))
    outside = leafless.filter(id__lte=horizon).order_by("id").values_list("id", flat=True)
    ids = list(outside[:SHOWN + 1])
    if ids:
        shown = ", ".join(map(str, ids[:SHOWN])) + (" …" if len(ids) > SHOWN else "")
        report.findings.append(f"event(s) {shown} are older than the newest head (which "
                               f"covers every event up to id {horizon}) but not in the tree: "
                               "inserted behind the log's back")
    unsealed = leafless.filter(id__gt=horizon).count()
    if unsealed:
        report.notes.append(f"{unsealed} event(s) newer than the newest head are not sealed "
                            "yet (`ledger seal`)")

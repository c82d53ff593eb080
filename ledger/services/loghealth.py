"""The verifiable log's health where people look (docs/integrity.md, "What the
admin shows"): one reading for the admin's log page, /metrics and the
notifications; a goal's check against the log for its timeline; the rolling
comparison the doctor runs; witnesses' reports.

- ``health``: the newest head and checkpoint, the seal lag, the sealer's
  alarm, and each configured witness with the size it last cosigned and how
  far behind it is;
- ``goal_check``: a goal's sealed events against their leaves and the newest
  signed head, under this server's public key (the key file, never the
  database's copy), as the offline verifier checks an export;
- ``check_leaves``: the doctor's rolling comparison (ledger/log/leafcheck.py);
- ``tell``: the notifications the log's state calls for, each once (keyed);
- ``witness_report``: a witness (or the sealer, from a witness's answer)
  reports a split view or a rollback; ``add_cosignatures``: a witness's POST,
  where a cosigned checkpoint the log does not hold is such a report.
"""

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.urls import reverse

from ledger.domain import notices
from ledger.domain.events import iso
from ledger.eventstore import clock
from ledger.log import cosigning, leafcheck, merkle_store, sealer_state, signing, tlog_witness
from ledger.models import Cosignature, Event, LogLeaf, SchedulerBeat, TreeHead
from ledger.project.siteurl import base_url
from ledger.services.notifications import enqueue
from wakeledger_verify import heads, merkle, notes

logger = logging.getLogger(__name__)

ALARM_TOLD = "log.alarm_told"  # SchedulerBeat row: when the raised alarm was last told
SPLIT_VIEW, ROLLBACK = "split_view", "rollback"
REPORT_KINDS = {SPLIT_VIEW: notices.WITNESS_SPLIT_VIEW, ROLLBACK: notices.WITNESS_ROLLBACK}


@dataclass(frozen=True)
class Witness:
    name: str
    cosigned_size: int | None  # the largest head it cosigned (None: none yet)
    cosigned_at: datetime | None  # when it signed that cosignature
    lag_leaves: int  # the newest head's size minus what it cosigned
    lag_seconds: float  # how long the oldest head it has not cosigned has waited
    rolled_back: bool  # it cosigned more leaves than the tree has now
    behind: bool  # lag_seconds past WAKELEDGER_WITNESS_MAX_LAG_MINUTES


@dataclass(frozen=True)
class Health:
    tree_size: int
    head: TreeHead | None
    checkpoint: str  # the newest checkpoint with its cosignatures ("" when none)
    seal_lag_events: int
    seal_lag_seconds: float
    alarm: str | None  # why the sealer refuses to sign, or None
    witnesses: list[Witness] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        """Everything that keeps the log from reading as verified."""
        return _problems(self.alarm, self.witnesses, self.tree_size)


def _problems(alarm: str | None, found: list[Witness], tree_size: int) -> list[str]:
    return [*([f"ALARM: {alarm}"] if alarm else []),
            *(f"witness {w.name} cosigned {w.cosigned_size} leaves, more than the log's "
              f"{tree_size}: the log was rolled back" for w in found if w.rolled_back)]


def _instant(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def seal_lag(now: datetime) -> tuple[int, float]:
    """Events recorded after the newest head's horizon, and how long the oldest
    has waited (0 when all are sealed): primary-key lookups only."""
    head = TreeHead.objects.order_by("-id").values_list("horizon", flat=True).first() or 0
    last = Event.objects.aggregate(last=Max("id"))["last"] or 0
    oldest = (Event.objects.filter(id__gt=head).order_by("id")
              .values_list("recorded_at", flat=True).first())
    return max(0, last - head), max(0.0, (now - oldest).total_seconds()) if oldest else 0.0


def _any_witness() -> bool:
    return bool(settings.WAKELEDGER_WITNESS_KEYS or settings.WAKELEDGER_TLOG_WITNESSES)


def log_alarm() -> str | None:
    """Why the sealer refuses to sign (its alarm), or None."""
    return sealer_state.inconsistency_alarm()


def witnesses(now: datetime, tree_size: int | None = None,
              newest: TreeHead | None = None) -> list[Witness]:
    """Each configured witness's standing (pulling or pushed to: every key
    ``cosigning.witnesses`` knows): two indexed queries per witness."""
    if not _any_witness():
        return []
    if tree_size is None:
        tree_size = merkle_store.size()
        newest = TreeHead.objects.order_by("-id").first()
    limit = timedelta(minutes=settings.WAKELEDGER_WITNESS_MAX_LAG_MINUTES).total_seconds()
    found = []
    for verifier in cosigning.witnesses():
        last = (Cosignature.objects.filter(witness=verifier.name).select_related("head")
                .order_by("-head__size", "-id").first())
        size = last.head.size if last else None
        # The first head it has not cosigned: how long it has waited.
        waiting = (TreeHead.objects.exclude(checkpoint="").filter(size__gt=size or 0)
                   .order_by("id").values_list("timestamp", flat=True).first())
        since = _instant(waiting) if waiting else None
        lag_seconds = max(0.0, (now - since).total_seconds()) if since else 0.0
        found.append(Witness(
            name=verifier.name, cosigned_size=size,
            cosigned_at=(datetime.fromtimestamp(last.timestamp, tz=now.tzinfo)
                         if last and 0 <= last.timestamp < 2**40 else None),
            lag_leaves=max(0, (newest.size if newest else 0) - (size or 0)),
            lag_seconds=lag_seconds, rolled_back=size is not None and size > tree_size,
            behind=lag_seconds > limit))
    return found


def health(now: datetime | None = None) -> Health:
    now = now or clock.now()
    newest = TreeHead.objects.order_by("-id").first()
    with_note = TreeHead.objects.exclude(checkpoint="").order_by("-id").first()
    tree_size = merkle_store.size()
    lag_events, lag_seconds = seal_lag(now)
    return Health(tree_size=tree_size, head=newest,
                  checkpoint=cosigning.cosigned(with_note) if with_note else "",
                  seal_lag_events=lag_events, seal_lag_seconds=lag_seconds,
                  alarm=sealer_state.inconsistency_alarm(),
                  witnesses=witnesses(now, tree_size, newest))


# ------------------------------------------------------------------ a goal's check


@dataclass(frozen=True)
class GoalCheck:
    """A goal's events against the log. ``status``: "verified" (every sealed
    event matches its leaf and is included in the newest head, whose signature
    this server's key checks), "unsealed" (none is sealed yet: nothing to
    check), "failed" (``detail`` says what) or "unknown" (no key to check with)."""

    status: str
    detail: str
    sealed: int = 0  # events checked against the log
    events: int = 0  # the goal's events
    head_size: int = 0

    @property
    def failed(self) -> bool:
        return self.status == "failed"


def server_key() -> Any:
    """This server's public key, read from its key file (None when there is
    none): what the database holds of keys is what is being checked."""
    path = Path(settings.WAKELEDGER_SIGNING_KEY_FILE)
    if not path.exists():
        return None
    return signing.signer(path).private_key.public_key()


def goal_check(goal_id: str, shown: Sequence[Event] | None = None, *,
               events: int | None = None) -> GoalCheck:
    """The goal's events (``shown``, a timeline page's, already read; all of
    them when None: the whole-chain check) against their stored leaves and
    the newest signed head: each sealed event's leaf recomputed and compared
    with the stored one, its inclusion proof (from the stored subtrees)
    reaching the head's root, and the head's signature checked with this
    server's key. A constant number of queries for a page (``events``: the
    goal's count, when the caller knows it)."""
    head = TreeHead.objects.order_by("-id").first()
    if head is None:
        return GoalCheck("unsealed", "no signed head yet", events=events or 0)
    if shown is None:
        rows = {row[0]: row for row in Event.objects.filter(goal_id=goal_id)
                .values_list(*merkle_store.EVENT_COLUMNS)}
    else:
        rows = {event.id: tuple(getattr(event, column) for column in merkle_store.EVENT_COLUMNS)
                for event in shown}
    total = events if events is not None else len(rows)
    leaves = {event_id: (position, digest) for event_id, position, digest in
              LogLeaf.objects.filter(event_id__in=list(rows), position__lt=head.size)
              .values_list("event_id", "position", "hash")}
    if not leaves:
        return GoalCheck("unsealed", "none of these events is sealed yet", events=total,
                         head_size=head.size)
    sealed = [(leaves[event_id][0], leaves[event_id][1], rows[event_id])
              for event_id in sorted(leaves, key=lambda e: rows[e][2])]
    changed, records = [], []
    for position, stored, row in sealed:
        record = merkle_store.record(position, row)
        leaf = merkle_store.leaf(record)
        records.append((position, leaf, row[2]))
        if leaf.hex() != stored:
            changed.append(row[2])
    count = len(sealed)
    if changed:
        shown = ", ".join(map(str, changed[:5])) + (" …" if len(changed) > 5 else "")
        return GoalCheck("failed", f"event(s) seq {shown} no longer match their sealed "
                         "leaves: changed after they were sealed", count, total, head.size)
    key = server_key()
    if key is None:
        return GoalCheck("unknown", "this server has no signing key file to check the head "
                         "with", count, total, head.size)
    if head.key_id != heads.key_id(key):
        # A key just rotated signs the next head; until then this is a
        # failure to say, not a head to trust.
        return GoalCheck("failed", f"the newest head (size {head.size}) names the key "
                         f"{head.key_id}, not this server's key {heads.key_id(key)}", count,
                         total, head.size)
    if not heads.signature_valid(head.as_dict(), key):
        return GoalCheck("failed", f"the newest head (size {head.size}) carries no valid "
                         f"signature of this server's key {heads.key_id(key)}", count, total,
                         head.size)
    try:
        subtrees = {name: bytes.fromhex(digest) for name, digest in
                    merkle_store.subtrees([p for p, _, _ in records], head.size).items()}
        root = bytes.fromhex(head.root)
        for position, leaf, seq in records:
            path = merkle.inclusion_path(position, head.size, subtrees)
            if merkle.root_from_inclusion(position, head.size, leaf, path) != root:
                return GoalCheck("failed", f"event seq {seq}: its inclusion proof does not "
                                 "reach the signed head's root", count, total, head.size)
    except (merkle_store.TreeCorrupt, KeyError) as error:
        return GoalCheck("failed", f"the stored tree cannot prove these events: {error}",
                         count, total, head.size)
    return GoalCheck("verified", f"{count} of {total} event(s) checked: each matches its "
                     f"sealed leaf and is included in the signed head of {head.size} leaves "
                     f"(key {head.key_id})", count, total, head.size)


@dataclass(frozen=True)
class GoalStanding:
    """A goal against the log, and the log's own state: what a timeline shows."""

    check: GoalCheck
    problems: list[str]

    @property
    def refutes(self) -> bool:
        """Whether nothing may read as verified: the goal's check failed, or
        the log's alarm (or a witness's rollback) stands."""
        return self.check.failed or bool(self.problems)


def goal_standing(goal_id: str, shown: Sequence[Event] | None = None, *,
                  events: int | None = None) -> GoalStanding:
    return GoalStanding(goal_check(goal_id, shown, events=events), log_problems())


def log_problems() -> list[str]:
    """What keeps every page from saying "verified": the sealer's alarm and a
    rollback a witness's cosignature shows. No query without witnesses."""
    if not _any_witness():
        return _problems(log_alarm(), [], 0)
    tree_size = merkle_store.size()
    return _problems(log_alarm(), witnesses(clock.now(), tree_size), tree_size)


# ------------------------------------------------------------------ the doctor's pass


def check_leaves() -> leafcheck.Pass | None:
    """The doctor's rolling comparison: raises the sealer's alarm on a
    mismatch (the pass is returned either way; None when the tree is damaged
    beyond a comparison), then tells whoever the alarm concerns."""
    try:
        done = leafcheck.run()
    except Exception as error:  # the doctor reports, it never dies of it
        logger.warning("the rolling leaf comparison failed: %s", type(error).__name__)
        return None
    if done.mismatches:
        sealer_state.raise_alarm(leafcheck.alarm_text(done.mismatches))
    try:
        tell()
    except Exception as error:  # told at the next seal; the doctor's report stands
        logger.warning("could not record the log's notifications: %s", type(error).__name__)
    return done


# ------------------------------------------------------------------ notifications


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _log_link() -> str:
    return base_url() + reverse("admin:ledger_log")


def tell(now: datetime | None = None) -> int:
    """Record the notifications the log's state calls for, each once: the
    alarm when it rises (once until it clears) and when it clears, a witness
    that fell behind (one per size it stopped at), a rollback the server sees.
    Run after every seal, by the doctor and by ``ledger notify``. Returns the
    rows written."""
    now = now or clock.now()
    state = health(now)
    link = _log_link()
    written = 0
    told = SchedulerBeat.objects.filter(name=ALARM_TOLD).values_list("at", flat=True).first()
    if state.alarm and told is None:
        # Once per episode, however its words change while it stands (a
        # rolling pass names more leaves each run): the page has the latest.
        with transaction.atomic():
            written += _notice(f"{notices.LOG_ALARM}:{iso(now)}",
                               notices.LOG_ALARM, [f"The sealer signs no head: {state.alarm}",
                                                   "Nothing is repaired by itself: see "
                                                   "docs/integrity.md."], link, now)
            SchedulerBeat.objects.update_or_create(name=ALARM_TOLD, defaults={"at": now})
    elif not state.alarm and told is not None:
        with transaction.atomic():
            written += _notice(f"{notices.LOG_ALARM_CLEARED}:{iso(told)}",
                               notices.LOG_ALARM_CLEARED,
                               [f"The log's alarm (told {iso(told)}) has cleared: a head "
                                "was signed again."], link, now)
            SchedulerBeat.objects.filter(name=ALARM_TOLD).delete()
    # A C2SP witness's 409 may name a size no cosignature here shows.
    for pushed in tlog_witness.configured():
        held = tlog_witness.holds(pushed)
        if held > state.tree_size:
            written += witness_report(pushed.name, ROLLBACK, held,
                                      f"its add-checkpoint answer says it holds {held} "
                                      "leaves, more than the log has", now=now)
    for witness in state.witnesses:
        if witness.rolled_back:
            # Keyed by what it holds, not by the tree's size: told once.
            written += witness_report(witness.name, ROLLBACK, witness.cosigned_size or 0,
                                      f"it cosigned {witness.cosigned_size} leaves, more "
                                      "than the log has", now=now)
        elif witness.behind:
            written += _notice(
                f"{notices.WITNESS_BEHIND}:{witness.name}:{witness.cosigned_size or 0}",
                notices.WITNESS_BEHIND,
                [f"Witness {witness.name} last cosigned "
                 f"{witness.cosigned_size or 'no'} leaves; the newest head has "
                 f"{witness.lag_leaves + (witness.cosigned_size or 0)}, and a head has "
                 f"waited {int(witness.lag_seconds // 60)} minutes for it (the limit is "
                 f"{settings.WAKELEDGER_WITNESS_MAX_LAG_MINUTES})."], link, now)
    return written


def _notice(key: str, kind: str, lines: list[str], link: str, now: datetime) -> int:
    return enqueue(key, kind, notices.title(kind),
                   lambda row_key: "\n".join([*lines, f"open: {link}",
                                              f"notification: {row_key}"]),
                   reason=notices.LOG_REASON, goal=False, now=now)


def witness_report(witness: str, kind: str, size: int, detail: str, *,
                   now: datetime | None = None) -> int:
    """A witness holds a view of the log this server does not: ``kind`` is
    ``split_view`` (a checkpoint of this log's origin, signed by its key, that
    no stored head has) or ``rollback`` (a size larger than the log's).
    Told once per (witness, kind, size, detail); logged at ERROR. Returns rows
    written. The contract other callers use (the C2SP submitter's 409, the
    witness's own report): /work/wt/notes/CONTRACTS.md, and docs/integrity.md."""
    if kind not in REPORT_KINDS:
        raise ValueError(f"a witness reports {', '.join(sorted(REPORT_KINDS))}, not {kind!r}")
    now = now or clock.now()
    logger.error("ALARM: witness %s reports a %s of the log at size %d: %s", witness,
                 kind.replace("_", " "), size, detail)
    kind_ = REPORT_KINDS[kind]
    return _notice(f"{kind_}:{witness}:{size}:{_digest(detail)}", kind_,
                   [f"Witness {witness} reports a {kind.replace('_', ' ')} of the log at "
                    f"size {size}: {detail}"], _log_link(), now)


def add_cosignatures(note: str) -> list[str]:
    """A witness's POST of a cosigned checkpoint (``cosigning.add``). One that
    a configured witness validly cosigned, of this log, signed by this
    server's key, that no stored head has is reported before the refusal is
    raised: a rollback when it holds more leaves than the tree, else a split
    view. The witness sends the checkpoint it accepted when it finds either."""
    try:
        return cosigning.add(note)
    except cosigning.UnknownCheckpoint:
        _report_unknown(note)
        raise


def _report_unknown(note: str) -> None:
    body, _ = notes.split(note)
    checkpoint = notes.parse_checkpoint(body)
    key = server_key()
    if key is None or checkpoint.origin != settings.WAKELEDGER_LOG_ORIGIN:
        return
    try:
        opened = notes.open_checkpoint(note, notes.verifier(checkpoint.origin, key),
                                       cosigning.witnesses())
    except notes.NoteError:
        return  # not signed by this log: no view of it at all
    # More leaves than the tree holds: the log went back (heads and leaves
    # deleted, a backup restored); otherwise another tree at that size.
    kind = ROLLBACK if checkpoint.size > merkle_store.size() else SPLIT_VIEW
    for name in sorted(opened.cosigned_by):
        witness_report(name, kind, checkpoint.size,
                       f"it cosigned the checkpoint of size {checkpoint.size}, root "
                       f"{checkpoint.root.hex()}, signed by this log's key, which no "
                       "stored head has")

"""Witnesses' cosignatures (C2SP tlog-cosignature v1) on the log's checkpoints.

A witness (``wakeledger-verify witness``) checks that a checkpoint extends the
last one it accepted and sends it back cosigned; the server keeps the
cosignatures of the witnesses it is configured to know
(WAKELEDGER_WITNESS_KEYS), each checked here, and serves them with the
checkpoint: a client that needs a quorum of witnesses finds it in one note.
"""

from django.conf import settings
from django.db import transaction

from ledger.models import Cosignature, TreeHead
from wakeledger_verify import add_checkpoint, notes


class UnknownCheckpoint(Exception):
    """No signed head has this checkpoint."""


class NoValidCosignature(Exception):
    """No signature on the note is a valid cosignature of a configured witness."""


class TimeOutOfRange(ValueError):
    """A valid cosignature timestamped where no signed 64-bit integer reaches."""


# A cosignature's time is an unsigned 64-bit count of seconds on the wire; it
# is kept in a signed 64-bit column (PostgreSQL's bigint, SQLite's integer),
# and nothing before 2^63 seconds is a time anyone witnessed.
LATEST_TIME = 2**63 - 1


def witnesses() -> list[notes.Verifier]:
    """The pull witnesses' keys and those the log pushes to (WAKELEDGER_TLOG_WITNESSES)."""
    keys = [notes.parse_verifier(key) for key in settings.WAKELEDGER_WITNESS_KEYS]
    pushed = [w.key for w in add_checkpoint.parse(settings.WAKELEDGER_TLOG_WITNESSES)]
    return keys + [key for key in pushed if key not in keys]


def add(note: str) -> list[str]:
    """Keep every configured witness's valid cosignature on ``note`` (a
    checkpoint this server signed); the names of the witnesses kept."""
    body, signatures = notes.split(note)
    checkpoint = notes.parse_checkpoint(body)
    head = next((h for h in TreeHead.objects.filter(size=checkpoint.size)
                 .exclude(checkpoint="").order_by("-id")
                 if notes.split(h.checkpoint)[0] == body), None)
    if head is None:
        raise UnknownCheckpoint(f"no signed head has this checkpoint (size {checkpoint.size})")
    kept = []
    with transaction.atomic():
        for witness in witnesses():
            for signature in signatures:
                when = witness.verify(body, signature)
                if when is None:
                    continue
                if when > LATEST_TIME:
                    raise TimeOutOfRange(f"{witness.name}'s cosignature is timestamped {when}, "
                                         f"past the latest time kept ({LATEST_TIME} seconds)")
                Cosignature.objects.update_or_create(
                    head=head, witness=witness.name,
                    defaults={"timestamp": when, "line": signature.line()})
                kept.append(witness.name)
                break
    if not kept:
        raise NoValidCosignature("no signature on the checkpoint is a valid cosignature of a "
                                 "witness this server knows (WAKELEDGER_WITNESS_KEYS)")
    return kept


def cosigned(head: TreeHead) -> str:
    """The head's checkpoint with its witnesses' cosignatures, one signed note."""
    lines = "".join(head.cosignatures.order_by("witness").values_list("line", flat=True))
    return head.checkpoint + lines

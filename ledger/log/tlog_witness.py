"""The log pushes its checkpoints to C2SP tlog-witness witnesses (``add-checkpoint``).

Each witness in WAKELEDGER_TLOG_WITNESSES (its submission prefix and its
cosigner key) gets the newest signed checkpoint with a consistency proof
from the size it holds, and answers with its cosignatures, which are kept
beside those of the pull witness (``ledger.log.cosigning``) and served with
the checkpoint.

When it runs: a seal that signs a new head writes this module's django-q2
row in the head's own transaction (``enqueue``: an outbox row, so a crash
after the commit still submits). The network is never inside the seal: the
qcluster runs ``submit_due`` after the commit, with a short timeout per
call. A witness that fails is tried again with backoff (30 s doubling to an
hour), kept per witness in the cache, without holding up the seal or the
other witnesses; the row is written again for the earliest retry.

The size a witness holds is the largest head it cosigned here, or what its
last 409 said. A 409 names the size it holds: the request is made again
with a proof from that size, as the spec says (https://c2sp.org/tlog-witness).
A witness that holds more leaves than this log has is not argued with: that
is a rollback of this log, logged as an error, for a person to look at.
"""

import hashlib
import logging
import urllib.error
import urllib.request
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db.models import Max
from django_q.models import Schedule

from ledger.eventstore import clock
from ledger.log import cosigning, merkle_store
from ledger.models import Cosignature, TreeHead
from wakeledger_verify import notes
from wakeledger_verify.add_checkpoint import (
    SIZE_TYPE,
    Configured,
    format_request,
    parse,
    parse_size,
)

logger = logging.getLogger(__name__)

TASK = "ledger.log.tlog_witness.submit_due"
SCHEDULE_NAME = "wakeledger-tlog-witness"
TIMEOUT = 10.0  # seconds per call: a witness that hangs delays only its own retry
FIRST_RETRY, LAST_RETRY = 30, 3600  # seconds: 30 s, 1 min, 2 min … 1 h
MAX_CONFLICTS = 2  # 409s followed in one attempt: the witness moves only forward


class SubmitFailed(Exception):
    """The witness did not cosign; the message says why (no secret in it)."""


def configured() -> list[Configured]:
    return parse(settings.WAKELEDGER_TLOG_WITNESSES)


def enqueue() -> None:
    """In the seal's transaction, when it signed a new head: the row that
    submits it after the commit (none when no witness is configured)."""
    if not settings.WAKELEDGER_TLOG_WITNESSES:
        return
    _wake_at(clock.now())


def _wake_at(when: datetime, *, since: datetime | None = None) -> None:
    rows = Schedule.objects.filter(name=SCHEDULE_NAME)
    if since is not None and rows.filter(next_run__gt=since, next_run__lte=when).exists():
        # A seal wrote its row while this run went on, due sooner: keep it. (The
        # row this run came from is due no later than ``since``; django-q2
        # deletes it, maybe only after this run, so it is never kept.)
        return
    rows.delete()  # one row (django-q2 keeps names loose)
    Schedule.objects.create(name=SCHEDULE_NAME, func=TASK, schedule_type=Schedule.ONCE,
                            repeats=-1, next_run=when)


# ------------------------------------------------------------------ the task


def _state_key(witness: Configured) -> str:
    # By the key, not the name: a witness whose key changed starts afresh.
    # Hashed: an ML-DSA-44 key's text is longer than a cache key may be.
    return "wakeledger:tlog-witness:" + hashlib.sha256(witness.key.text().encode()).hexdigest()


def holds(witness: Configured) -> int:
    """The size this witness holds, as far as this log knows (0: none)."""
    hint = (cache.get(_state_key(witness)) or {}).get("holds")
    if hint is not None:
        return int(hint)
    largest = Cosignature.objects.filter(witness=witness.name).aggregate(
        size=Max("head__size"))["size"]
    return largest or 0


def submit_due() -> dict[str, str]:
    """The qcluster's task: submit the newest checkpoint to every configured
    witness whose retry is due; what happened, by witness name."""
    head = TreeHead.objects.exclude(checkpoint="").order_by("-id").first()
    now = clock.now()
    outcome: dict[str, str] = {}
    retries: list[datetime] = []
    for witness in configured():
        state = cache.get(_state_key(witness)) or {}
        due = state.get("next")
        if head is None or Cosignature.objects.filter(head=head,
                                                      witness=witness.name).exists():
            outcome[witness.name] = "up to date"
            continue
        if due is not None and datetime.fromisoformat(due) > now:
            outcome[witness.name] = f"waiting until {due}"
            retries.append(datetime.fromisoformat(due))
            continue
        try:
            size = submit(witness, head)
        except SubmitFailed as error:
            # Read again: a 409 followed in ``submit`` kept the size it named.
            state = cache.get(_state_key(witness)) or {}
            failures = int(state.get("failures", 0)) + 1
            delay = min(FIRST_RETRY * 2 ** (failures - 1), LAST_RETRY)
            retry = now + timedelta(seconds=delay)
            cache.set(_state_key(witness), state | {"failures": failures,
                                                    "next": retry.isoformat()}, None)
            retries.append(retry)
            level = logging.ERROR if failures >= 5 else logging.WARNING
            logger.log(level, "tlog witness %s did not cosign checkpoint %d (attempt %d, "
                       "next in %d s): %s", witness.name, head.size, failures, delay, error)
            outcome[witness.name] = f"failed: {error}"
            continue
        cache.set(_state_key(witness), {"holds": size}, None)
        outcome[witness.name] = f"cosigned {size}"
    if retries:
        _wake_at(min(retries), since=now)
    return outcome


def submit(witness: Configured, head: TreeHead) -> int:
    """add-checkpoint for ``head``, following the witness's 409s; the size
    cosigned. The cosignatures are kept (``cosigning.add``)."""
    old = holds(witness)
    for _ in range(MAX_CONFLICTS + 1):
        if old > head.size:
            logger.error("tlog witness %s holds %d leaves of this log, more than its %d: "
                         "the log was rolled back or forked (docs/integrity.md)",
                         witness.name, old, head.size)
            raise SubmitFailed(f"the witness holds {old} leaves, more than the log's "
                               f"{head.size}")
        proof = [] if old in (0, head.size) else [
            bytes.fromhex(h) for h in merkle_store.consistency(old, head.size)]
        status, content_type, body = _post(witness.url + "/add-checkpoint",
                                           format_request(old, proof, head.checkpoint))
        if status == 409 and content_type.split(";")[0].strip() == SIZE_TYPE:
            try:
                old = parse_size(body)
            except ValueError as error:
                raise SubmitFailed(f"409 with a malformed size: {error}") from None
            state = cache.get(_state_key(witness)) or {}
            cache.set(_state_key(witness), state | {"holds": old}, None)
            continue
        if status != 200:
            text = body[:200].decode("utf-8", errors="replace").strip()
            raise SubmitFailed(f"HTTP {status}: {text}")
        return _keep(witness, head, body)
    raise SubmitFailed(f"the witness answered 409 {MAX_CONFLICTS + 1} times in a row")


def _keep(witness: Configured, head: TreeHead, body: bytes) -> int:
    try:
        kept = cosigning.add(head.checkpoint + body.decode("utf-8"))
    except (UnicodeDecodeError, notes.NoteError, cosigning.NoValidCosignature) as error:
        raise SubmitFailed(f"the answer is not a cosignature of {witness.name}: "
                           f"{error}") from None
    if witness.name not in kept:
        raise SubmitFailed(f"the answer carries no valid cosignature of {witness.name}")
    return head.size


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *_: object, **__: object) -> None:
        return None  # a witness answers; it does not send the log elsewhere


_opener = urllib.request.build_opener(_NoRedirect)


def _post(url: str, body: bytes) -> tuple[int, str, bytes]:
    request = urllib.request.Request(url, data=body, method="POST", headers={  # noqa: S310
        "Content-Type": "text/plain; charset=utf-8", "User-Agent": "wakeledger"})
    try:
        # http(s) only: checked by parse().
        with _opener.open(request, timeout=TIMEOUT) as answer:
            return answer.status, answer.headers.get("Content-Type", ""), answer.read(65536)
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read(65536)
    except (OSError, ValueError) as error:  # refused, timed out, TLS, a bad URL
        raise SubmitFailed(f"{type(error).__name__}: {error}") from None

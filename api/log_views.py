"""The verifiable log over HTTP (/api/v1/ledger/…): signed tree heads and
RFC 9162 inclusion and consistency proofs. Thin, like api.views: the tree
lives in ledger.log.merkle_store, the checks in wakeledger_verify.

Who may ask: every role reads heads (an agent may keep them too); an agent
gets inclusion proofs for its own goals' events only (another's is 404, as
everywhere in the API); consistency proofs, which are about the whole log,
are for auditors and operators.
"""

from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from api import errors
from api.idempotency import idempotent
from api.problems import Problem
from api.schema import BODY, IDEMPOTENT, QUERY, responses
from api.serializers import StrictSerializer, validated
from api.serializers.responses import chain_fields, event_fields
from api.views.common import IDEMPOTENCY, READERS, LedgerView
from ledger.access.accounts import AGENT, AUDITOR, OPERATOR, role_of
from ledger.log import cosigning, merkle_store
from ledger.models import Event, LogLeaf, SigningKey, TreeHead
from ledger.services import loghealth
from wakeledger_verify import notes

# ----------------------------------------------------------------------- shapes


class HeadSerializer(serializers.Serializer):
    size = serializers.IntegerField()
    root = serializers.CharField()
    timestamp = serializers.CharField()
    key_id = serializers.CharField()
    horizon = serializers.IntegerField(help_text="every event with an id up to this is in "
                                                 "the tree's first size leaves")
    signature = serializers.CharField()
    public_key = serializers.CharField(allow_null=True)


class HeadPageSerializer(serializers.Serializer):
    heads = HeadSerializer(many=True)
    next_before = serializers.IntegerField(allow_null=True)


def position(help_text: str, *, required: bool = True) -> serializers.IntegerField:
    """A tree size or an event id a query names: 1 up to what a bigint holds."""
    return serializers.IntegerField(min_value=1, max_value=2**62, required=required,
                                    help_text=help_text)


class HeadsQuerySerializer(StrictSerializer):
    before = position("only heads of fewer leaves (the previous page's next_before)",
                      required=False)
    limit = serializers.IntegerField(min_value=1, max_value=1000, required=False, default=100)


class InclusionQuerySerializer(StrictSerializer):
    event = position("the event's id")
    size = position("the tree size to prove against (default: the newest signed head's)",
                    required=False)


class ConsistencyQuerySerializer(StrictSerializer):
    # "from" is a Python keyword: declared through the class namespace.
    vars()["from"] = position("the earlier tree size")
    to = position("the later tree size (default: the newest signed head's)", required=False)


class RecordSerializer(serializers.Serializer):
    position = serializers.IntegerField()
    id = serializers.IntegerField()
    goal = serializers.CharField()
    vars().update(event_fields(data=serializers.JSONField))  # seq, kind, data, actor, …
    idempotency_key = serializers.CharField(allow_null=True)
    vars().update(chain_fields())  # prev_hash, hash


class InclusionSerializer(serializers.Serializer):
    event = serializers.IntegerField()
    leaf_index = serializers.IntegerField()
    tree_size = serializers.IntegerField()
    leaf_hash = serializers.CharField()
    audit_path = serializers.ListField(child=serializers.CharField())
    record = RecordSerializer()


class ConsistencySerializer(serializers.Serializer):
    vars()["from"] = serializers.IntegerField()
    to = serializers.IntegerField()
    from_root = serializers.CharField()
    to_root = serializers.CharField()
    proof = serializers.ListField(child=serializers.CharField())


def head_body(head: TreeHead, keys: dict[str, str] | None = None) -> dict[str, Any]:
    if keys is None:
        keys = dict(SigningKey.objects.filter(key_id=head.key_id)
                    .values_list("key_id", "public_key"))
    return {**head.as_dict(), "public_key": keys.get(head.key_id)}


def newest_head() -> TreeHead:
    head = TreeHead.objects.order_by("-id").first()
    if head is None:
        raise Problem("not_sealed", "No tree head has been signed yet.")
    return head


def tree_size_arg(value: int, name: str, tree_size: int) -> int:
    if value > tree_size:
        raise Problem("validation_error", f"The tree has {tree_size} leaves.",
                      errors={name: [f"Ensure this value is less than or equal to "
                                     f"{tree_size} (the tree's size)."]})
    return value


class CosignatureSerializer(StrictSerializer):
    checkpoint = serializers.CharField(
        max_length=20000, trim_whitespace=False,
        help_text="a checkpoint of this log as GET /ledger/checkpoint served it, with the "
                  "witness's cosignature/v1 line added (C2SP tlog-cosignature)")


class CosignedSerializer(serializers.Serializer):
    size = serializers.IntegerField()
    witnesses = serializers.ListField(child=serializers.CharField())


UNSEALED_COUNTED = 10_000  # the tail's count stops here: a frozen log's backlog is not scanned


class TailSerializer(serializers.Serializer):
    tree_size = serializers.IntegerField(help_text="the newest signed head's size (0: none yet)")
    horizon = serializers.IntegerField(help_text="the newest signed head's horizon (0: none)")
    head_timestamp = serializers.CharField(allow_null=True)
    newest_event = serializers.IntegerField(allow_null=True,
                                            help_text="the largest event id recorded")
    unsealed = serializers.IntegerField(
        help_text=f"events recorded above the newest head's horizon, i.e. accepted and not "
                  f"yet under a signed head (counted up to {UNSEALED_COUNTED:,})")
    oldest_unsealed_at = serializers.CharField(
        allow_null=True, help_text="when the oldest of those was recorded")


# ----------------------------------------------------------------------- views


def _note_answers() -> Any:
    """GET /ledger/checkpoint's answers: the note as text/plain, problems as JSON."""
    answers = responses({}, "not_sealed")
    answers[(200, "text/plain")] = OpenApiResponse(OpenApiTypes.STR,
                                                   description="the signed note")
    return answers


# The types a GET of the checkpoint may ask for: the note is text/plain
# (C2SP tlog-checkpoint), so a client naming that type, text/* or */* (or no
# Accept at all) gets it.
_NOTE_TYPES = frozenset({"text/plain", "text/*", "*/*"})


def accepts_note(accept: str | None) -> bool:
    """Whether an Accept header admits the note's text/plain (a range with q=0 refuses)."""
    if accept is None or not accept.strip():
        return True
    for part in accept.split(","):
        media, *params = (piece.strip() for piece in part.split(";"))
        quality = next((p.split("=", 1)[1].strip() for p in params
                        if p.replace(" ", "").lower().startswith("q=")), "1")
        try:
            refused = float(quality) <= 0
        except ValueError:
            refused = False
        if media.lower() in _NOTE_TYPES and not refused:
            return True
    return False


class CheckpointView(LedgerView):
    roles = {"GET": READERS, "POST": (AUDITOR, OPERATOR)}

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # GET answers the note itself (text/plain), which the API's JSON
        # renderer does not name: DRF's negotiation would refuse the note's
        # own type. A GET (or HEAD) checks Accept here; a refusal, and POST, are JSON.
        reads = request.method in ("GET", "HEAD")
        if reads and not force and not accepts_note(request.META.get("HTTP_ACCEPT")):
            raise exceptions.NotAcceptable(
                "The checkpoint is a signed note served as text/plain: ask for text/plain, "
                "text/* or */* (or send no Accept).")
        return super().perform_content_negotiation(request, force=force or reads)

    @extend_schema(summary="The newest signed head as a C2SP tlog-checkpoint signed note, "
                           "with the cosignatures of known witnesses (text/plain)",
                   responses=_note_answers())
    def get(self, request: Request) -> HttpResponse:
        head = TreeHead.objects.exclude(checkpoint="").order_by("-id").first()
        if head is None:
            raise Problem("not_sealed", "No checkpoint has been signed yet.")
        return HttpResponse(cosigning.cosigned(head), content_type="text/plain; charset=utf-8")

    @extend_schema(summary="A witness sends the checkpoint back cosigned (auditor, operator)",
                   request=CosignatureSerializer, parameters=[IDEMPOTENCY],
                   responses=responses({200: CosignedSerializer}, *BODY, *IDEMPOTENT,
                                       "checkpoint_unknown", "cosignature_invalid",
                                       "time_out_of_range"))
    @idempotent(CosignatureSerializer)
    def post(self, request: Request, data: dict[str, Any]) -> Response:
        try:
            # A checkpoint of this log no head has is a split view, told (services).
            kept = loghealth.add_cosignatures(data["checkpoint"])
        except notes.NoteError as error:
            raise Problem("validation_error", str(error),
                          errors={"checkpoint": [str(error)]}) from None
        except cosigning.UnknownCheckpoint as error:
            # Answered, not raised: a raised refusal rolls the request's
            # transaction back, and with it the split view or rollback just
            # recorded for a person (loghealth.add_cosignatures).
            return errors.response("checkpoint_unknown", str(error))
        except cosigning.TimeOutOfRange as error:
            raise Problem("time_out_of_range", str(error),
                          errors={"checkpoint": [str(error)]}) from None
        except cosigning.NoValidCosignature as error:
            raise Problem("cosignature_invalid", str(error)) from None
        size = notes.parse_checkpoint(notes.split(data["checkpoint"])[0]).size
        return Response({"size": size, "witnesses": kept})


class LogTailView(LedgerView):
    """What the log accepted beyond its newest signed head: what lets a
    witness tell a log that is quiet from one that accepts events and signs
    no checkpoint (the sealer's alarm freezes it; docs/integrity.md)."""

    roles = {"GET": (AUDITOR, OPERATOR)}

    @extend_schema(summary="Events accepted beyond the newest signed head (auditor, operator)",
                   responses=responses({200: TailSerializer}))
    def get(self, request: Request) -> Response:
        return Response(merkle_store.tail(UNSEALED_COUNTED))



class LogHeadView(LedgerView):
    roles = {"GET": READERS}

    @extend_schema(summary="The newest signed tree head of the log (keep it to check later)",
                   responses=responses({200: HeadSerializer}, "not_sealed"))
    def get(self, request: Request) -> Response:
        return Response(head_body(newest_head()))


class LogHeadsView(LedgerView):
    roles = {"GET": READERS}

    @extend_schema(summary="Signed tree heads, newest first",
                   parameters=[HeadsQuerySerializer],
                   responses=responses({200: HeadPageSerializer}, *QUERY))
    def get(self, request: Request) -> Response:
        query = validated(HeadsQuerySerializer, request.query_params.dict())
        found = TreeHead.objects.order_by("-size", "-id")
        if "before" in query:
            found = found.filter(size__lt=query["before"])
        page = list(found[:query["limit"] + 1])
        more = len(page) > query["limit"]
        page = page[:query["limit"]]
        keys = dict(SigningKey.objects.filter(key_id__in={h.key_id for h in page})
                    .values_list("key_id", "public_key"))
        return Response({"heads": [head_body(h, keys) for h in page],
                         "next_before": page[-1].size if more else None})


class InclusionProofView(LedgerView):
    roles = {"GET": READERS}

    @extend_schema(summary="An event's inclusion proof in the tree of a given size "
                           "(RFC 9162 2.1.3)",
                   parameters=[InclusionQuerySerializer],
                   responses=responses({200: InclusionSerializer}, *QUERY, "not_found",
                                       "not_sealed"))
    def get(self, request: Request) -> Response:
        query = validated(InclusionQuerySerializer, request.query_params.dict())
        events = Event.objects.filter(pk=query["event"])
        if role_of(request.user) == AGENT:
            events = events.filter(goal__agent=request.user.get_username())
        row = events.values_list(*merkle_store.EVENT_COLUMNS).first()
        if row is None:
            raise Problem("not_found", f"No event {query['event']}.")
        leaf = LogLeaf.objects.filter(event_id=row[0]).first()
        if leaf is None:
            raise Problem("not_sealed", f"Event {row[0]} is not in the log's tree yet.")
        size = query.get("size") or newest_head().size
        size = tree_size_arg(size, "size", merkle_store.size())
        if size <= leaf.position:
            detail = f"Event {row[0]} is leaf {leaf.position}, outside a tree of {size} leaves."
            if "size" in query:  # the caller's size is too small for this event
                raise Problem("validation_error", detail, errors={"size": [
                    f"Ensure this value is greater than {leaf.position}."]})
            raise Problem("not_sealed", detail)  # sealed, but no head covers it yet
        return Response({"event": row[0], "leaf_index": leaf.position, "tree_size": size,
                         "leaf_hash": leaf.hash,
                         "audit_path": merkle_store.inclusion(leaf.position, size),
                         "record": merkle_store.record(leaf.position, row)})


class ConsistencyProofView(LedgerView):
    roles = {"GET": (AUDITOR, OPERATOR)}

    @extend_schema(summary="A consistency proof between two tree sizes (RFC 9162 2.1.4)",
                   parameters=[ConsistencyQuerySerializer],
                   responses=responses({200: ConsistencySerializer}, *QUERY, "not_sealed"))
    def get(self, request: Request) -> Response:
        query = validated(ConsistencyQuerySerializer, request.query_params.dict())
        tree_size = merkle_store.size()
        second = tree_size_arg(query.get("to") or newest_head().size, "to", tree_size)
        first = tree_size_arg(query["from"], "from", second)
        return Response({"from": first, "to": second,
                         "from_root": merkle_store.root(first).hex(),
                         "to_root": merkle_store.root(second).hex(),
                         "proof": merkle_store.consistency(first, second)})

"""The clients of /mcp's OAuth server (api/mcp/oauth.py) and what they may
send it: where a code may go (``redirect_refusal``), the Client ID Metadata
Document fetcher and its SSRF limits (``MetadataFetcher``), dynamic
registration read strictly, throttled per attempt and audited
(``ThrottledRegistrationView``), and the parameters no endpoint should look
anything up with (``parameters_refusal``). docs/agents.md "OAuth: what the
server holds a connector to"."""

import hashlib
import ipaddress
import json
import socket
import ssl
import time
import urllib.parse
from collections.abc import Iterable
from typing import Any

import urllib3
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from oauth2_provider import cimd
from oauth2_provider.models import get_application_model
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views import (
    DynamicClientRegistrationManagementView,
    DynamicClientRegistrationView,
)

from api.parsing import strict_loads
from ledger.access import accounts
from ledger.access.models import OAuthAudit


def checksum(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def audit(kind: str, application: Any, *, agent: str = "", by: str = "",
          client_id: str = "") -> None:
    OAuthAudit.objects.create(
        kind=kind, client_id=(application.client_id if application else client_id)[:100],
        client_name=((application.name or "") if application else "")[:255],
        agent=agent[:150], by=by[:150])


# ---------------------------------------------------------------- redirects

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


def redirect_refusal(uri: str) -> str | None:
    """Why ``uri`` may not be a redirect URI, or None. https anywhere; plain
    http only to the loopback address (RFC 8252 §7.3: a local client's own
    listener), and only where WAKELEDGER_OAUTH_LOOPBACK allows it (off with
    the HTTPS profile). Any other http host would carry the code in the
    clear to whoever answers for that name."""
    try:
        parts = urllib.parse.urlsplit(uri)
        host, _ = parts.hostname, parts.port  # .port raises for one out of range
    except ValueError:
        return "is not a URL"
    if not host or parts.fragment:
        return "must be an absolute URL without a fragment"
    if parts.scheme == "https":
        return None
    if parts.scheme == "http":
        if "http" not in oauth2_settings.ALLOWED_REDIRECT_URI_SCHEMES:
            return "must use https"
        if host.lower() not in LOOPBACK_HOSTS:
            return "must use https (plain http only to 127.0.0.1, [::1] or localhost)"
        return None
    return "must use https"


# ---------------------------------------------------------------- Client ID Metadata Documents

class MetadataFetcher(cimd.SafeMetadataFetcher):
    """DOT's SSRF-hardened fetcher (https only; the address resolved once,
    checked, then connected to; no redirects; one deadline; a size cap),
    which may also reach the networks WAKELEDGER_OAUTH_CIMD_PRIVATE_NETWORKS
    lists: none by default, so a client_id URL naming an internal address
    (the cloud metadata service, a database) is never fetched."""

    def fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        networks = [ipaddress.ip_network(n, strict=False)
                    for n in settings.WAKELEDGER_OAUTH_CIMD_PRIVATE_NETWORKS]
        if not networks:
            return super().fetch(client_id)
        parsed = cimd._validate_client_id_url(client_id)
        port = parsed.port or 443
        try:
            infos = socket.getaddrinfo(parsed.hostname, port, proto=socket.IPPROTO_TCP)
        except socket.gaierror as exc:
            raise cimd.CIMDError(f"could not resolve client_id host: {exc}") from exc
        ips = [info[4][0] for info in infos]
        for ip in ips:
            if not cimd._ip_is_public(ip) and not any(
                    ipaddress.ip_address(ip) in n for n in networks):
                raise cimd.CIMDError(f"client_id host resolves to a non-public address ({ip})")
        if not ips:
            raise cimd.CIMDError("client_id host did not resolve to any address")
        deadline = time.monotonic() + oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS
        path = parsed.path + (f"?{parsed.query}" if parsed.query else "")
        headers = {"Host": parsed.netloc, "Accept": "application/json, application/*+json"}
        last: Exception | None = None
        for ip in ips:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            pool = urllib3.HTTPSConnectionPool(
                host=ip, port=port, retries=False, maxsize=1,
                timeout=urllib3.Timeout(connect=remaining, read=remaining, total=remaining),
                ssl_context=ssl.create_default_context(), server_hostname=parsed.hostname)
            try:
                response = pool.urlopen("GET", path, headers=headers, redirect=False,
                                        preload_content=False)
                try:
                    return self._read_document(response)
                finally:
                    response.release_conn()
            except urllib3.exceptions.HTTPError as exc:
                last = exc
            finally:
                pool.close()
        raise cimd.CIMDError(f"could not fetch client_id document: {last}")


def parameters_refusal(request: HttpRequest) -> JsonResponse | None:
    """A query or form parameter no column can hold (a NUL: PostgreSQL's text
    refuses it, and psycopg's error is one DOT does not catch), refused as
    ``invalid_request`` before DOT looks anything up with it."""
    for query in (request.GET, request.POST):
        for values in query.lists():
            if any("\x00" in v for v in (values[0], *values[1])):
                return _metadata_error("invalid_request", "A parameter contains a NUL character.")
    return None


# ---------------------------------------------------------------- registration (RFC 7591)

# Registration is open (RFC 7591: a hosted connector registers itself), so
# one address may try only so many registrations an hour, refused or not; a
# registration grants nothing until an operator consents.
REGISTRATIONS = accounts.Window("oauth-register", 20, 3600)
MAX_REDIRECT_URIS = 10
MAX_URI = 2000
MAX_TEXT = 255
MAX_DEPTH = 8


def _metadata_error(error: str, description: str, status: int = 400) -> JsonResponse:
    # RFC 7591 §3.2.2's shape; ``error`` is the stable code.
    return JsonResponse({"error": error, "error_description": description}, status=status)


def _text_refusal(value: Any, depth: int = 0) -> str | None:
    """Why a value somewhere in the document cannot be stored, or None: a
    lone surrogate or NUL in a string, nesting deeper than any metadata."""
    if depth > MAX_DEPTH:
        return "is nested too deeply"
    if isinstance(value, str):
        if "\x00" in value:
            return "contains a NUL character"
        try:
            value.encode("utf-8")  # fails only on a lone surrogate ("\ud800")
        except UnicodeEncodeError:
            return "contains a lone surrogate character"
        return None
    if isinstance(value, dict):
        items: Iterable[Any] = [*value.keys(), *value.values()]
    elif isinstance(value, list):
        items = value
    else:
        return None
    return next((r for r in (_text_refusal(v, depth + 1) for v in items) if r), None)


def registration_refusal(request: HttpRequest) -> JsonResponse | None:
    """A registration body DOT must not see, answered with a stable code:
    not JSON (415), too large (413), unreadable JSON or values no column
    stores (``invalid_client_metadata``), a redirect URI this server will
    not send a code to (``invalid_redirect_uri``)."""
    media = request.content_type.split(";")[0].strip().lower()
    if media != "application/json":
        return _metadata_error("invalid_client_metadata",
                               "Send the client metadata as application/json.", 415)
    limit = settings.WAKELEDGER_MAX_BODY_BYTES
    try:
        # Over DATA_UPLOAD_MAX_MEMORY_SIZE (the same limit), Django refuses
        # to read the body at all.
        too_big = int(request.META.get("CONTENT_LENGTH") or 0) > limit or len(request.body) > limit
    except (ValueError, RequestDataTooBig):
        too_big = True
    if too_big:
        return _metadata_error("invalid_client_metadata",
                               f"The body is larger than {limit} bytes.", 413)
    try:
        data = strict_loads(request.body)
    except ValueError as exc:
        return _metadata_error("invalid_client_metadata", str(exc))
    if not isinstance(data, dict):
        return _metadata_error("invalid_client_metadata", "The body must be a JSON object.")
    for key, value in data.items():
        refusal = _text_refusal(value) or _text_refusal(key)
        if refusal:
            return _metadata_error("invalid_client_metadata", f"{key[:40]!r} {refusal}.")
    name = data.get("client_name", "")
    if not isinstance(name, str) or len(name) > MAX_TEXT:
        return _metadata_error("invalid_client_metadata",
                               f"client_name must be a string of at most {MAX_TEXT} characters.")
    uris = data.get("redirect_uris", [])
    if not isinstance(uris, list) or len(uris) > MAX_REDIRECT_URIS \
            or not all(isinstance(u, str) and len(u) <= MAX_URI for u in uris):
        return _metadata_error("invalid_redirect_uri",
                               f"redirect_uris must be a list of at most {MAX_REDIRECT_URIS} "
                               f"URLs of at most {MAX_URI} characters.")
    for uri in uris:
        refusal = redirect_refusal(uri)
        if refusal:
            return _metadata_error("invalid_redirect_uri", f"{uri[:100]!r} {refusal}.")
    for field in ("grant_types", "response_types"):
        if field in data and (not isinstance(data[field], list)
                              or not all(isinstance(g, str) for g in data[field])):
            return _metadata_error("invalid_client_metadata", f"{field} must be a list of strings.")
    if not isinstance(data.get("token_endpoint_auth_method", ""), str):
        return _metadata_error("invalid_client_metadata",
                               "token_endpoint_auth_method must be a string.")
    return None


class ThrottledRegistrationView(DynamicClientRegistrationView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        address = accounts.client_address(request)
        wait = REGISTRATIONS.locked_for(address)
        if wait:
            response = _metadata_error("invalid_client_metadata",  # RFC 7591 §3.2.2
                                       "Too many registrations from this address; see "
                                       "Retry-After.", 429)
            response["Retry-After"] = str(wait)
            return response
        # Every attempt counts: a throttle counting only successes would let
        # an address probe the endpoint without end.
        REGISTRATIONS.record(address)
        answer = registration_refusal(request) or super().post(request, *args, **kwargs)
        if answer.status_code == 201:
            application = get_application_model().objects.filter(
                client_id=_json(answer).get("client_id", "")).first()
            audit(OAuthAudit.REGISTERED, application, by=f"dynamic registration from {address}")
        return answer


class CheckedRegistrationManagementView(DynamicClientRegistrationManagementView):
    """RFC 7592's configuration endpoint, its PUT body read as strictly as a
    registration's."""

    def put(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return registration_refusal(request) or super().put(request, *args, **kwargs)


def _json(response: HttpResponse) -> dict[str, Any]:
    try:
        data = json.loads(response.content)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}

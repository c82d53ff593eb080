"""OAuth 2.1 for hosted connectors, with django-oauth-toolkit (DOT).

DOT serves the authorization server: RFC 8414 and RFC 9728 metadata, Client
ID Metadata Documents and dynamic client registration (RFC 7591), the token
endpoint (authorization code with PKCE S256 only, refresh tokens rotated with
reuse detection) and revocation; the settings (``OAUTH2_PROVIDER``, in
ledger/project/oauth.py) turn on every RFC 9700 gate, so tokens are stored as
SHA-256 checksums only. What is ours (docs/agents.md "OAuth"):

- the consent page (``ConsentView``): in the product's look, a signed-in
  operator chooses which agent identity the connector acts as (none is
  chosen for them); the grant, and so every token from it, belongs to that
  agent user and to ``/mcp`` (RFC 8707), so ``/mcp`` sees the connector
  exactly as the REST API sees that agent (its own goals only);
- an error found after the person signed in is shown to them, with the way
  back to the connector (the login page's CSP would block the redirect);
- the rules DOT leaves open (``LedgerValidator``): plain http redirects to the
  loopback address only (``redirect_refusal``), a replayed authorization code revokes what the
  code gave (RFC 6749 §4.1.2), a reused refresh token's revoked family is
  audited;
- an access token as a ``/mcp`` caller (``principal``): live, for ``/mcp``,
  for an active agent; a deactivated agent's tokens end at once and stay
  ended (``end_access``);
- registration, Client ID Metadata Documents and where a code may go: in
  api/mcp/oauth_clients.py;
- the audit trail (``OAuthAudit``): each registration, consent, refusal,
  revocation and replay.
"""

import logging
import urllib.parse
from collections.abc import Iterable
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db.models import F
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from oauth2_provider import cimd
from oauth2_provider.exceptions import FatalClientError, OAuthToolkitError
from oauth2_provider.forms import AllowForm
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
)
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views import (
    AuthorizationView,
    RevokeTokenView,
    TokenView,
)
from oauthlib.oauth2.rfc6749.errors import CustomOAuth2Error

from api.mcp.inprocess import Principal
from api.mcp.oauth_clients import (
    audit,
    checksum,
    parameters_refusal,
    redirect_refusal,
)
from ledger.access.accounts import AGENT, OPERATOR, role_of
from ledger.access.models import OAuthAudit
from ledger.project import siteurl
from ledger.project.middleware import POLICY

logger = logging.getLogger("wakeledger.security")
SCOPE = "mcp"
MCP_PATH = "/mcp"


# ---------------------------------------------------------------- the resource (RFC 8707)

def _canonical(uri: str) -> str:
    # RFC 3986 §6.2.2: scheme and host compare without case; a trailing
    # slash names the same endpoint here (/mcp/ is served as /mcp).
    parts = urllib.parse.urlsplit(uri)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path.rstrip('/')}"


def mcp_resources(request: HttpRequest) -> set[str]:
    """The names ``/mcp`` goes by as an RFC 8707 resource: under SITE_URL
    (what the resource metadata publishes when it is set) and under the
    address the request came to (what it publishes otherwise)."""
    return {_canonical(siteurl.base_url(request) + MCP_PATH),
            _canonical(request.build_absolute_uri(MCP_PATH))}


def _ours(resource: str, ours: set[str]) -> bool:
    try:
        return _canonical(resource) in ours
    except ValueError:
        return False


def principal(token: str, resources: Iterable[str]) -> Principal | None:
    """The live access token ``token`` is, as a ``/mcp`` caller: its agent
    user, if the token was issued for ``/mcp`` (one of ``resources``). A
    token for another resource, or for none, is refused: the MCP
    authorization spec has the server check the audience, so a token a
    connector obtained for some other service cannot be replayed here."""
    found = (get_access_token_model().objects.select_related("user", "application")
             .filter(token_checksum=checksum(token)).first())
    if found is None or not found.is_valid([SCOPE]) or found.user is None \
            or found.application is None or not found.user.is_active:
        return None
    ours = set(resources)
    # Every resource must be ours: a token also valid elsewhere could be
    # replayed here by that other server.
    if not found.resource or not all(_ours(r, ours) for r in found.resource):
        return None
    if role_of(found.user) != AGENT:
        return None  # the identity lost its agent role since the consent
    return Principal(found.user, found, f"oauth:{found.application_id}:{found.user_id}")


# ---------------------------------------------------------------- the validator

def _code_key(code: str) -> str:
    return f"wl:oauth-code:{checksum(code)[:32]}"


class LedgerValidator(OAuth2Validator):
    """DOT's validator with the rules it leaves to the server."""

    def validate_redirect_uri(self, client_id: str, redirect_uri: str, request: Any,
                              *args: Any, **kwargs: Any) -> bool:
        # Checked on every authorization request, so a client registered
        # before the rule (or by hand in the admin) is held to it too.
        return (redirect_refusal(redirect_uri) is None
                and super().validate_redirect_uri(client_id, redirect_uri, request,
                                                  *args, **kwargs))

    def get_default_redirect_uri(self, client_id: str, request: Any,
                                 *args: Any, **kwargs: Any) -> str | None:
        uri = super().get_default_redirect_uri(client_id, request, *args, **kwargs)
        return uri if uri and redirect_refusal(uri) is None else None

    def _save_bearer_token(self, token: dict[str, Any], request: Any,
                           *args: Any, **kwargs: Any) -> Any:
        saved = super()._save_bearer_token(token, request, *args, **kwargs)
        if request.grant_type == "authorization_code" and token.get("refresh_token"):
            # What this code gave, kept (in the database cache) as long as a
            # refresh token from it may live: a replay of the code revokes it.
            family = (get_refresh_token_model().objects
                      .filter(token_checksum=checksum(token["refresh_token"]))
                      .values_list("token_family", flat=True).first())
            if family:
                cache.set(_code_key(request.code), str(family),
                          timeout=oauth2_settings.REFRESH_TOKEN_EXPIRE_SECONDS)
        return saved

    def validate_code(self, client_id: str, code: str, client: Any, request: Any,
                      *args: Any, **kwargs: Any) -> bool:
        if super().validate_code(client_id, code, client, request, *args, **kwargs):
            return True
        family = cache.get(_code_key(code))
        if family:
            # RFC 6749 §4.1.2: a code used twice may have been stolen; the
            # tokens its first exchange gave are revoked with the refusal.
            cache.delete(_code_key(code))
            refresh = get_refresh_token_model()
            first = refresh.objects.select_related("user").filter(token_family=family).first()
            refresh.revoke_family(family)
            audit(OAuthAudit.CODE_REUSED, client,
                  agent=first.user.get_username() if first and first.user else "", by="client")
            logger.warning("OAuth: authorization code replayed by client %s; its tokens "
                           "are revoked", client_id)
        return False

    def validate_refresh_token(self, refresh_token: str, client: Any, request: Any,
                               *args: Any, **kwargs: Any) -> bool:
        model = get_refresh_token_model()
        found = (model.objects.select_related("user", "application")
                 .filter(token_checksum=checksum(refresh_token))
                 .order_by(F("revoked").desc(nulls_first=True)).first())
        family_live = bool(found and found.revoked is not None and found.token_family
                           and model.objects.filter(token_family=found.token_family,
                                                    revoked__isnull=True).exists())
        valid = super().validate_refresh_token(refresh_token, client, request, *args, **kwargs)
        if not valid and family_live:
            # DOT revoked the whole family (reuse detection); say so, once.
            audit(OAuthAudit.REFRESH_REUSED, found.application,
                  agent=found.user.get_username() if found.user else "", by="client")
            logger.warning("OAuth: a rotated-away refresh token of client %s was used "
                           "again; its family is revoked", client.client_id if client else "-")
        return valid

    def validate_client_id(self, client_id: str, request: Any, *args: Any, **kwargs: Any) -> bool:
        known = True
        if oauth2_settings.CIMD_ENABLED and cimd.is_cimd_client_id(client_id):
            known = get_application_model().objects.filter(client_id=client_id).exists()
        valid = super().validate_client_id(client_id, request, *args, **kwargs)
        if valid and not known:
            audit(OAuthAudit.REGISTERED, request.client, by="metadata document")
        return valid


# ---------------------------------------------------------------- an agent's access

def end_access(user: Any, why: str = "agent deactivated") -> int:
    """End every OAuth grant and token ``user`` holds: refresh token families
    revoked, access tokens and pending codes deleted, one audit row per
    connector. Run when the user is deactivated or leaves the agent group,
    so reactivating it (or putting it back) brings none of them back: the
    connector must be authorized again."""
    refresh = get_refresh_token_model()
    live = refresh.objects.filter(user=user, revoked__isnull=True).select_related("application")
    applications = {t.application_id: t.application for t in live}
    for family in {t.token_family for t in live if t.token_family}:
        refresh.revoke_family(family)
    live.update(revoked=timezone.now())
    tokens = get_access_token_model().objects.filter(user=user).select_related("application")
    applications.update({t.application_id: t.application for t in tokens})
    tokens.delete()
    get_grant_model().objects.filter(user=user).delete()
    for application in applications.values():
        if application is not None:
            audit(OAuthAudit.REVOKED, application, agent=user.get_username(), by=why)
    return len(applications)


def user_saved(sender: Any, instance: Any, **kwargs: Any) -> None:
    """pre_save of the user model: a user saved inactive holds no OAuth
    access. Whatever deactivates it (the admin's user form, a shell, a
    command), the tokens end with the save, in its transaction."""
    if instance.pk is not None and not instance.is_active:
        update_fields = kwargs.get("update_fields")
        if update_fields is None or "is_active" in update_fields:
            end_access(instance)


def groups_changed(sender: Any, instance: Any, action: str, reverse: bool,
                   pk_set: set[Any] | None, **kwargs: Any) -> None:
    """m2m_changed of the user model's groups: a user taken out of the
    agent group (by the admin's user form, or the group's member list)
    loses the OAuth access it held as that agent."""
    if action not in ("post_remove", "post_clear"):
        return
    if reverse:
        if instance.name != AGENT:
            return
        users = list(get_user_model().objects.filter(pk__in=pk_set or ()))
        if action == "post_clear":
            users = list(get_user_model().objects.filter(
                pk__in=get_access_token_model().objects.values("user_id")))
    else:
        users = [instance]
    for user in users:
        if not user.groups.filter(name=AGENT).exists():
            end_access(user, "agent role removed")


# ---------------------------------------------------------------- consent

def agents() -> Any:
    return (get_user_model().objects.filter(is_active=True, groups__name=AGENT)
            .order_by("username"))


class ConsentForm(AllowForm):
    # No agent chosen for the person: a first-in-the-list default would
    # hand a connector whichever identity sorts first.
    agent = forms.ModelChoiceField(queryset=agents(), required=False,
                                   empty_label="— choose an agent —",
                                   to_field_name="username",
                                   help_text="The connector acts as this agent: it sees and "
                                             "writes that agent's goals only.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["agent"].queryset = agents()

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("allow") and not data.get("agent"):
            self.add_error("agent", "Choose the agent identity the connector acts as.")
        return data


def _redirect_error(error: str, description: str, credentials: dict[str, Any]
                    ) -> OAuthToolkitError:
    return OAuthToolkitError(
        error=CustomOAuth2Error(error=error, description=description,
                                state=credentials.get("state")),
        redirect_uri=credentials["redirect_uri"])


class ConsentView(AuthorizationView):
    """DOT's authorization endpoint with our consent page and rules."""

    template_name = "mcp/consent.html"
    form_class = ConsentForm

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        refusal = parameters_refusal(request)
        if refusal:
            return refusal
        if request.user.is_authenticated and role_of(request.user) != OPERATOR:
            refused = {"error": "access_denied",
                       "description": "Only an operator may authorize a connector. Sign in "
                                      "as one, or ask one to."}
            return self.render_to_response(self.get_context_data(form=None, error=refused),
                                           status=403)
        return super().dispatch(request, *args, **kwargs)

    def validate_authorization_request(self, request: HttpRequest) -> tuple[Any, Any]:
        scopes, credentials = super().validate_authorization_request(request)
        # Refused before the page is shown (DOT would refuse "plain" only
        # once the person had consented), back to the client.
        if request.GET.get("code_challenge_method") != "S256":
            raise _redirect_error("invalid_request",
                                  "PKCE with code_challenge_method=S256 is required.",
                                  credentials)
        ours = mcp_resources(request)
        for resource in request.GET.getlist("resource"):
            if not _ours(resource, ours):
                # RFC 8707 §2: this server issues tokens for /mcp only.
                raise _redirect_error(
                    "invalid_target", "This server issues tokens for "
                    f"{siteurl.base_url(request) + MCP_PATH} only.", credentials)
        return scopes, credentials

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        # The admin's context: the product's name in the header and title
        # (not Django's default) and the signed-in person's links.
        return {**admin.site.each_context(self.request), "title": "Authorize a connector",
                **super().get_context_data(**kwargs)}

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = super().get(request, *args, **kwargs)
        redirect = getattr(self, "oauth2_data", {}).get("redirect_uri")
        if redirect and response.status_code == 200:
            # The form's POST ends in a redirect to the client's callback;
            # CSP's form-action covers that redirect too, so allow its origin.
            parts = urllib.parse.urlsplit(redirect)
            policy = POLICY.format(nonce=request.csp_nonce)  # type: ignore[attr-defined]
            response["Content-Security-Policy"] = policy.replace(
                "form-action 'self'", f"form-action 'self' {parts.scheme}://{parts.netloc}")
        return response

    def error_response(self, error: Any, application: Any, **kwargs: Any) -> HttpResponse:
        fatal = isinstance(error, FatalClientError)
        if self.request.method != "GET" and not fatal:
            # The consent form's own POST: its page's CSP allows the client's
            # origin, so DOT's redirect reaches it.
            return super().error_response(error, application, **kwargs)
        # An error found on the page's GET, which follows the sign-in: a
        # redirect to the client here would be the end of the login form's
        # POST, and the login page's CSP (form-action 'self') stops it, so
        # the person saw nothing and the client heard nothing. Instead the
        # person reads the error, with the link back to the client carrying
        # it (RFC 6749 §4.1.2.1, with RFC 9207's issuer) — none when the
        # client or its redirect URI cannot be trusted (a fatal error).
        oauthlib_error = error.oauthlib_error
        target = "" if fatal else (oauthlib_error.redirect_uri or "")
        url = ""
        if target and redirect_refusal(target) is None:
            url = target + ("&" if "?" in target else "?") + oauthlib_error.urlencoded
            if oauth2_settings.COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS:
                url += "&" + urllib.parse.urlencode(
                    {"iss": oauth2_settings.oauth2_authorization_server_issuer(self.request)})
        return self.render_to_response(self.get_context_data(
            form=None, error={"error": oauthlib_error.error,
                              "description": oauthlib_error.description}, return_url=url),
            status=oauthlib_error.status_code)

    def form_valid(self, form: ConsentForm) -> HttpResponse:
        application = self.get_application(form.cleaned_data["client_id"])
        person = self.request.user
        agent = form.cleaned_data.get("agent")
        allowed = bool(form.cleaned_data.get("allow")) and agent is not None
        audit(OAuthAudit.GRANTED if allowed else OAuthAudit.REFUSED, application,
              agent=agent.get_username() if allowed else "", by=person.get_username(),
              client_id=form.cleaned_data["client_id"])
        logger.info("OAuth consent %s: client %s as %s by %s",
                    "granted" if allowed else "refused", form.cleaned_data["client_id"],
                    agent.get_username() if allowed else "-", person.get_username())
        if not allowed:
            return super().form_valid(form)
        if not form.cleaned_data.get("resource"):
            # A client that named no resource gets tokens for /mcp all the
            # same: the only resource here, and so every token has an
            # audience /mcp can check.
            form.cleaned_data["resource"] = siteurl.base_url(self.request) + MCP_PATH
        # The grant belongs to the agent: DOT takes the grant's user from
        # request.user (oauth2_backends), so the person stands aside for it.
        self.request.user = agent
        try:
            return super().form_valid(form)
        finally:
            self.request.user = person

    def form_invalid(self, form: ConsentForm) -> HttpResponse:
        # The page again, with its error and the connector it is about.
        application = self.get_application(str(form.data.get("client_id", "")))
        return self.render_to_response(self.get_context_data(
            form=form, application=application,
            redirect_uri=str(form.data.get("redirect_uri", ""))))

    @staticmethod
    def get_application(client_id: str) -> Any:
        return get_application_model().objects.filter(client_id=client_id).first()


class CheckedTokenView(TokenView):
    """DOT's token endpoint, its parameters checked first."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return parameters_refusal(request) or super().post(request, *args, **kwargs)


class AuditedRevokeView(RevokeTokenView):
    """DOT's revocation endpoint (RFC 7009), each revocation recorded."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        refusal = parameters_refusal(request)
        if refusal:
            return refusal
        token = request.POST.get("token", "")
        found = None
        for model in (get_access_token_model(), get_refresh_token_model()):
            found = (model.objects.select_related("user", "application")
                     .filter(token_checksum=checksum(token)).first()) if token else None
            if found is not None:
                break
        response = super().post(request, *args, **kwargs)
        if response.status_code == 200 and found is not None and found.application:
            audit(OAuthAudit.REVOKED, found.application,
                  agent=found.user.get_username() if found.user else "", by="client")
        return response

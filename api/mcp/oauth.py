"""OAuth 2.1 for hosted connectors, with django-oauth-toolkit (DOT).

DOT serves the authorization server: RFC 8414 and RFC 9728 metadata, dynamic
client registration (RFC 7591), the token endpoint (authorization code with
PKCE S256 only, refresh tokens rotated with reuse detection) and revocation;
the settings (``OAUTH2_PROVIDER``) turn on every RFC 9700 gate, so tokens are
stored as SHA-256 checksums only. What is ours:

- the consent page (``ConsentView``): in the admin's look, a signed-in
  operator chooses which agent identity the connector acts as; the grant,
  and so every token from it, belongs to that agent user, so ``/mcp`` sees the
  connector exactly as the REST API sees that agent (its own goals only);
- an access token as a ``/mcp`` caller (``principal``);
- the audit trail (``OAuthAudit``): each consent, refusal and revocation.
"""

import hashlib
import logging
import urllib.parse
from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse, JsonResponse
from oauth2_provider.forms import AllowForm
from oauth2_provider.models import get_access_token_model, get_refresh_token_model
from oauth2_provider.views import (
    AuthorizationView,
    DynamicClientRegistrationView,
    RevokeTokenView,
)

from api.mcp.inprocess import Principal
from ledger.access import accounts
from ledger.access.accounts import AGENT, OPERATOR, role_of
from ledger.access.models import OAuthAudit
from ledger.project.middleware import POLICY

logger = logging.getLogger("wakeledger.security")
SCOPE = "mcp"


def checksum(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def principal(token: str) -> Principal | None:
    """The live access token ``token`` is, as a ``/mcp`` caller: its agent user."""
    found = (get_access_token_model().objects.select_related("user", "application")
             .filter(token_checksum=checksum(token)).first())
    if found is None or not found.is_valid([SCOPE]) or found.user is None \
            or found.application is None or not found.user.is_active:
        return None
    if role_of(found.user) != AGENT:
        return None  # the identity lost its agent role since the consent
    return Principal(found.user, found, f"oauth:{found.application_id}:{found.user_id}")


def agents() -> Any:
    return (get_user_model().objects.filter(is_active=True, groups__name=AGENT)
            .order_by("username"))


class ConsentForm(AllowForm):
    agent = forms.ModelChoiceField(queryset=agents(), required=False, empty_label=None,
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


class ConsentView(AuthorizationView):
    """DOT's authorization endpoint with our consent page and rules."""

    template_name = "mcp/consent.html"
    form_class = ConsentForm

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.user.is_authenticated and role_of(request.user) != OPERATOR:
            response = HttpResponse("Only an operator may authorize a connector.",
                                    status=403, content_type="text/plain")
            return response
        asked = request.POST if request.method == "POST" else request.GET
        if request.user.is_authenticated and asked.get("code_challenge_method") != "S256":
            # Refused before the page is shown: DOT would refuse "plain" only
            # once the person had consented.
            return HttpResponse("PKCE with code_challenge_method=S256 is required.",
                                status=400, content_type="text/plain")
        return super().dispatch(request, *args, **kwargs)

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

    def form_valid(self, form: ConsentForm) -> HttpResponse:
        application = self.get_application(form.cleaned_data["client_id"])
        person = self.request.user
        agent = form.cleaned_data.get("agent")
        allowed = bool(form.cleaned_data.get("allow")) and agent is not None
        OAuthAudit.objects.create(
            kind=OAuthAudit.GRANTED if allowed else OAuthAudit.REFUSED,
            client_id=form.cleaned_data["client_id"][:100],
            client_name=(application.name if application else "")[:255],
            agent=agent.get_username() if allowed else "", by=person.get_username())
        logger.info("OAuth consent %s: client %s as %s by %s",
                    "granted" if allowed else "refused", form.cleaned_data["client_id"],
                    agent.get_username() if allowed else "-", person.get_username())
        if not allowed:
            return super().form_valid(form)
        # The grant belongs to the agent: DOT takes the grant's user from
        # request.user (oauth2_backends), so the person stands aside for it.
        self.request.user = agent
        try:
            return super().form_valid(form)
        finally:
            self.request.user = person

    @staticmethod
    def get_application(client_id: str) -> Any:
        from oauth2_provider.models import get_application_model

        return get_application_model().objects.filter(client_id=client_id).first()


class AuditedRevokeView(RevokeTokenView):
    """DOT's revocation endpoint (RFC 7009), each revocation recorded."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        token = request.POST.get("token", "")
        found = None
        for model in (get_access_token_model(), get_refresh_token_model()):
            found = (model.objects.select_related("user", "application")
                     .filter(token_checksum=checksum(token)).first()) if token else None
            if found is not None:
                break
        response = super().post(request, *args, **kwargs)
        if response.status_code == 200 and found is not None and found.application:
            OAuthAudit.objects.create(
                kind=OAuthAudit.REVOKED, client_id=found.application.client_id[:100],
                client_name=found.application.name[:255],
                agent=found.user.get_username() if found.user else "", by="client")
        return response


# Registration is open (RFC 7591: a hosted connector registers itself), so
# one address may register only so many clients an hour; a registration
# grants nothing until an operator consents.
REGISTRATIONS = accounts.Window("oauth-register", 20, 3600)


class ThrottledRegistrationView(DynamicClientRegistrationView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        address = accounts.client_address(request)
        wait = REGISTRATIONS.locked_for(address)
        if wait:
            response = JsonResponse({"error": "invalid_client_metadata",  # RFC 7591 §3.2.2
                                     "error_description": "Too many registrations from this "
                                                          "address; see Retry-After."},
                                    status=429)
            response["Retry-After"] = str(wait)
            return response
        answer = super().post(request, *args, **kwargs)
        if answer.status_code == 201:
            REGISTRATIONS.record(address)
        return answer

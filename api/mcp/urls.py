"""/mcp, and the OAuth authorization server hosted connectors discover from it.

DOT's views under ``/oauth/`` (ours for consent and revocation), its metadata
at the site's root where RFC 8414 and RFC 9728 clients look: the issuer is
the site itself, and ``/mcp``'s resource metadata is at
``/.well-known/oauth-protected-resource/mcp``. All in DOT's namespace, which
its metadata views reverse."""

from django.urls import include, path
from oauth2_provider import urls as dot_urls

from api.mcp.oauth import AuditedRevokeView, CheckedTokenView, ConsentView
from api.mcp.oauth_clients import CheckedRegistrationManagementView, ThrottledRegistrationView
from api.mcp.views import mcp_endpoint

oauth = [
    *dot_urls.metadata_urlpatterns,
    path("oauth/authorize/", ConsentView.as_view(), name="authorize"),
    path("oauth/token/", CheckedTokenView.as_view(), name="token"),
    path("oauth/revoke/", AuditedRevokeView.as_view(), name="revoke-token"),
    path("oauth/register/", ThrottledRegistrationView.as_view(), name="dcr-register"),
    path("oauth/register/<str:client_id>/", CheckedRegistrationManagementView.as_view(),
         name="dcr-register-management"),
]

urlpatterns = [
    path("mcp", mcp_endpoint, name="mcp"),
    # The same endpoint, not a redirect: a POST redirected loses its body in
    # some clients, and a connector URL pasted with a slash should just work.
    path("mcp/", mcp_endpoint, name="mcp-slash"),
    path("", include((oauth, "oauth2_provider"))),
]

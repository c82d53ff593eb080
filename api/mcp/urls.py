"""/mcp, and the OAuth authorization server hosted connectors discover from it.

DOT's views under ``/oauth/`` (ours for consent and revocation), its metadata
at the site's root where RFC 8414 and RFC 9728 clients look: the issuer is
the site itself, and ``/mcp``'s resource metadata is at
``/.well-known/oauth-protected-resource/mcp``. All in DOT's namespace, which
its metadata views reverse. CORS for browser-based clients is applied here,
once per view (api/mcp/cors.py): the metadata to any Origin, the endpoints a
page fetches to listed Origins, the authorization page to none."""

from django.urls import URLPattern, include, path
from oauth2_provider import urls as dot_urls

from api.mcp import cors
from api.mcp.oauth import AuditedRevokeView, CheckedTokenView, ConsentView
from api.mcp.oauth_clients import CheckedRegistrationManagementView, ThrottledRegistrationView
from api.mcp.views import mcp_endpoint

posted = cors.listed_origins("POST")

oauth = [
    # DOT's own list of metadata routes (both RFC 8414 and RFC 9728 forms), each public.
    *(URLPattern(route.pattern, cors.public(route.callback), route.default_args, route.name)
      for route in dot_urls.metadata_urlpatterns),
    path("oauth/authorize/", ConsentView.as_view(), name="authorize"),
    path("oauth/token/", posted(CheckedTokenView.as_view()), name="token"),
    path("oauth/revoke/", posted(AuditedRevokeView.as_view()), name="revoke-token"),
    path("oauth/register/", posted(ThrottledRegistrationView.as_view()), name="dcr-register"),
    path("oauth/register/<str:client_id>/",
         cors.listed_origins("GET, PUT, DELETE")(CheckedRegistrationManagementView.as_view()),
         name="dcr-register-management"),
]

urlpatterns = [
    path("mcp", mcp_endpoint, name="mcp"),
    # The same endpoint, not a redirect: a POST redirected loses its body in
    # some clients, and a connector URL pasted with a slash should just work.
    path("mcp/", mcp_endpoint, name="mcp-slash"),
    path("", include((oauth, "oauth2_provider"))),
]

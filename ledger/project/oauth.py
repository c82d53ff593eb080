"""django-oauth-toolkit's settings for hosted MCP connectors (docs/agents.md §5):
every RFC 9700 gate on — authorization code with PKCE S256 only, no implicit
or password grant, tokens stored as checksums, refresh tokens rotated with
reuse detection — Client ID Metadata Documents offered, dynamic client
registration open as the fallback (a client gets nothing until a signed-in
operator consents), the metadata of RFC 8414 and RFC 9728 at the site's
root. Apart from settings.py so that file stays one screenful per concern."""

from typing import Any


def provider_settings(access_seconds: int, refresh_seconds: int, *,
                      loopback: bool, cimd: bool = True) -> dict[str, Any]:
    """``OAUTH2_PROVIDER`` for the given token lifetimes; ``loopback`` admits
    http redirects to the loopback address (RFC 8252 local clients), and
    only there: api/mcp/oauth.py refuses any other http redirect, at
    registration and at every authorization request. ``cimd`` offers Client
    ID Metadata Documents (an https URL as the client_id, fetched by
    api.mcp.oauth.MetadataFetcher; docs/agents.md "OAuth")."""
    return {
        # Our validator: redirects, code replay, reuse audit (api/mcp/oauth.py).
        "OAUTH2_VALIDATOR_CLASS": "api.mcp.oauth.LedgerValidator",
        "SCOPES": {"mcp": "Use Wake Ledger's MCP tools as the chosen agent"},
        "DEFAULT_SCOPES": ["mcp"],
        "PKCE_REQUIRED": True,
        "ACCESS_TOKEN_EXPIRE_SECONDS": access_seconds,
        "REFRESH_TOKEN_EXPIRE_SECONDS": refresh_seconds,
        "AUTHORIZATION_CODE_EXPIRE_SECONDS": 120,
        "ROTATE_REFRESH_TOKEN": True,
        "REFRESH_TOKEN_REUSE_PROTECTION": True,
        "REFRESH_TOKEN_GRACE_PERIOD_SECONDS": 0,
        "ALLOWED_REDIRECT_URI_SCHEMES": ["https", "http"] if loopback else ["https"],
        "ALLOW_LOCALHOST_LOOPBACK": loopback,
        "REQUEST_APPROVAL_PROMPT": "force",
        "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
        "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
        "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
        "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,  # RFC 9207: the redirect names its issuer
        "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
        "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
        "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
        "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
        "DCR_ENABLED": True,
        "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
        # Client ID Metadata Documents before dynamic registration, as MCP
        # clients try them: https only, public addresses only (unless
        # WAKELEDGER_OAUTH_CIMD_PRIVATE_NETWORKS lists some), 5 s, 16 KiB,
        # at most 10 fetches at once per process, a failed URL not fetched
        # again for a minute; a document is kept 5 min to a day.
        "CIMD_ENABLED": cimd,
        "CIMD_METADATA_FETCHER": "api.mcp.oauth_clients.MetadataFetcher",
        "CIMD_FETCH_TIMEOUT_SECONDS": 5,
        "CIMD_MAX_DOCUMENT_SIZE": 16 * 1024,
        "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
        "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
        "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none", "client_secret_post",
                                                          "client_secret_basic"],
        "OAUTH2_PROTECTED_RESOURCE_NAME": "Wake Ledger MCP",
    }

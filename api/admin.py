from django.contrib import admin

from ledger.access.accounts import role_of
from ledger.access.models import ApiToken
from ledger.admin.base import ReadOnlyAdmin


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    """Who holds which token prefix. Tokens are created and revoked with
    `manage.py ledger agent create|revoke`; the digest is never shown."""

    list_display = ("prefix", "user", "role", "created_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("prefix", "user__username")
    list_select_related = ("user",)
    fields = ("prefix", "user", "created_at", "revoked_at")
    readonly_fields = fields

    @admin.display(description="role")
    def role(self, token: ApiToken) -> str:
        return role_of(token.user) or "-"


# ---------------------------------------------------------------- OAuth (/mcp's connectors)
# DOT registers editable admins of its own; here every one is read-only, and
# no token or secret is shown (tokens are stored as checksums only, client
# secrets hashed: settings.OAUTH2_PROVIDER). Connectors are registered by
# themselves (RFC 7591) and authorized on the consent page.

from oauth2_provider import models as oauth_models  # noqa: E402

from ledger.access.models import OAuthAudit  # noqa: E402

for _model in (oauth_models.get_application_model(), oauth_models.get_access_token_model(),
               oauth_models.get_refresh_token_model(), oauth_models.get_grant_model(),
               oauth_models.get_id_token_model(), oauth_models.get_device_grant_model()):
    if admin.site.is_registered(_model):
        admin.site.unregister(_model)


@admin.register(oauth_models.get_application_model())
class ConnectorAdmin(ReadOnlyAdmin):
    list_display = ("name", "client_id", "client_type", "redirect_uris", "created")
    search_fields = ("name", "client_id")
    fields = ("name", "client_id", "client_type", "authorization_grant_type", "redirect_uris",
              "created", "updated")
    readonly_fields = fields


@admin.register(oauth_models.get_access_token_model())
class ConnectorAccessTokenAdmin(ReadOnlyAdmin):
    list_display = ("id", "application", "user", "scope", "expires", "created")
    list_select_related = ("application", "user")
    fields = ("application", "user", "scope", "expires", "created")
    readonly_fields = fields


@admin.register(oauth_models.get_refresh_token_model())
class ConnectorRefreshTokenAdmin(ReadOnlyAdmin):
    list_display = ("id", "application", "user", "created", "revoked")
    list_select_related = ("application", "user")
    list_filter = ("revoked",)
    fields = ("application", "user", "created", "revoked")
    readonly_fields = fields


@admin.register(OAuthAudit)
class OAuthAuditAdmin(ReadOnlyAdmin):
    """Every consent, refusal and revocation of a connector's access."""

    list_display = ("recorded_at", "kind", "client_name", "client_id", "agent", "by")
    list_filter = ("kind",)
    search_fields = ("client_name", "client_id", "agent", "by")
    fields = list_display
    readonly_fields = fields

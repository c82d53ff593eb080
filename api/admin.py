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

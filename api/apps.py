from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    verbose_name = "Agents' REST API"

    def ready(self) -> None:
        from django.conf import settings
        from django.db.models.signals import pre_save

        from api import schema  # noqa: F401  (registers the OpenAPI auth extension)
        from api.mcp import oauth

        # A deactivated user's OAuth tokens end with the save that deactivates
        # it, by whatever path, so a later reactivation revives none of them.
        pre_save.connect(oauth.user_saved, sender=settings.AUTH_USER_MODEL,
                         dispatch_uid="api.oauth_end_access")

from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    verbose_name = "Agents' REST API"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import m2m_changed, pre_save

        from api import schema  # noqa: F401  (registers the OpenAPI auth extension)
        from api.mcp import oauth

        # A user's OAuth tokens end with the save that deactivates it, or the
        # change that takes it out of the agent group, by whatever path, so
        # undoing either later revives none of them.
        user = get_user_model()
        pre_save.connect(oauth.user_saved, sender=user, dispatch_uid="api.oauth_end_access")
        m2m_changed.connect(oauth.groups_changed, sender=user.groups.through,
                            dispatch_uid="api.oauth_end_access_groups")

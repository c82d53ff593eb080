from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _create_cache_table(sender: AppConfig, using: str = "default", **kwargs: Any) -> None:
    """The database cache's table (the throttles' counts, settings.CACHES):
    created by every migrate, so no deployment can forget `createcachetable`."""
    from django.core.management import call_command

    call_command("createcachetable", database=using, verbosity=0)


class ApiConfig(AppConfig):
    name = "api"
    verbose_name = "Agents' REST API"

    def ready(self) -> None:
        from api import schema  # noqa: F401  (registers the OpenAPI auth extension)

        post_migrate.connect(_create_cache_table, sender=self, dispatch_uid="api.cache_table")

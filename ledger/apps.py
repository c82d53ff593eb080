from typing import Any

from django.apps import AppConfig
from django.db import connections
from django.db.models.signals import post_migrate


def _reinstall_triggers(sender: AppConfig, using: str = "default", **kwargs: Any) -> None:
    from ledger.eventstore import triggers

    connection = connections[using]
    if triggers.table_exists(connection):
        triggers.install(connection)


def _ensure_role_groups(sender: AppConfig, using: str = "default", **kwargs: Any) -> None:
    """The role groups exist and let their staff members browse the ledger in
    the admin (view only: nobody may add, change or delete there)."""
    from django.apps import apps
    from django.contrib.auth.management import create_permissions
    from django.contrib.auth.models import Group, Permission
    from django.contrib.contenttypes.models import ContentType
    from django.db.models import Q

    from ledger.access.models import OAuthAudit

    # Connectors' access is the auditors' to see too: the OAuth
    # audit trail and DOT's clients and tokens (their admins show no secret).
    # DOT's permissions may not exist yet on a fresh database (post_migrate
    # reaches that app later), and the api label has no models module, so
    # Django never creates its permissions: both are made here.
    if apps.is_installed("oauth2_provider"):
        create_permissions(apps.get_app_config("oauth2_provider"), verbosity=0, using=using)
    audit_type = ContentType.objects.db_manager(using).get_for_model(OAuthAudit)
    Permission.objects.using(using).get_or_create(
        content_type=audit_type, codename="view_oauthaudit",
        defaults={"name": "Can view OAuth grant or revocation"})
    views = Permission.objects.using(using).filter(
        Q(content_type__app_label="ledger", codename__startswith="view_")
        | Q(content_type__app_label="api", codename="view_oauthaudit")
        | Q(content_type__app_label="oauth2_provider",
            codename__in=("view_application", "view_accesstoken", "view_refreshtoken")))
    for role in ("agent", "auditor", "operator"):
        group, _ = Group.objects.using(using).get_or_create(name=role)
        if role != "agent":
            group.permissions.add(*views)


def _create_cache_table(sender: AppConfig, using: str = "default", **kwargs: Any) -> None:
    """The database cache's table (the throttles' counts, settings.CACHES):
    created by every migrate, so no deployment can forget `createcachetable`.
    Connected here, not in `api`: Django sends post_migrate only to apps with
    a models module, and the API's models (tokens, idempotency records) live
    in ledger/models.py."""
    from django.core.management import call_command

    call_command("createcachetable", database=using, verbosity=0)


class LedgerConfig(AppConfig):
    name = "ledger"
    verbose_name = "Ledger"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from ledger.eventstore import checks  # noqa: F401  (registers the trigger check)
        from ledger.notify import channels

        # A bad WAKELEDGER_NOTIFY stops start-up (every process), not the first notice.
        channels.env_channels()

        # After every migrate (and flush), whatever rebuilt the events table.
        post_migrate.connect(_reinstall_triggers, sender=self,
                             dispatch_uid="ledger.reinstall_triggers")
        post_migrate.connect(_ensure_role_groups, sender=self,
                             dispatch_uid="ledger.ensure_role_groups")
        post_migrate.connect(_create_cache_table, sender=self,
                             dispatch_uid="ledger.cache_table")

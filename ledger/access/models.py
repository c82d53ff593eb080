"""Who may call the API: its bearer tokens (``ApiToken``) and the first answers
to its idempotent POSTs (``IdempotencyRecord``).

They live with the ledger's accounts (``ledger.access.accounts`` issues tokens
and prunes records; ``ledger agent create|revoke`` and ``ledger prune`` run it),
because the ledger imports nothing from ``api`` (docs/design.md, "Layout"). They keep
the ``api`` app label they were created under: their tables, migrations
(api/migrations), admin URLs (/admin/api/apitoken/) and permissions stay as
they were (docs/decisions.md, 2026-12 "ApiToken and IdempotencyRecord keep the
api label"). ``ledger/models.py`` imports this module, which registers them.
"""

from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """An agent's (or auditor's, operator's) bearer token.

    Only the public prefix and an HMAC-SHA256 digest of the whole token are
    stored; the token itself is printed once when it is created.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="api_tokens")
    prefix = models.CharField(max_length=16, unique=True)
    digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "api"  # see the comment above
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"


class IdempotencyRecord(models.Model):
    """The first response to a POST with an Idempotency-Key, per caller.

    Written in the same transaction as the events the command appended, or
    not at all (see api.idempotency): a record is always complete.
    """

    owner = models.CharField(max_length=150)
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64)  # sha256 of method, path and body
    status_code = models.PositiveSmallIntegerField()
    # Text, not JSON: PostgreSQL's jsonb reorders keys and a replay must be
    # the first answer byte for byte. A granted lease's token is not in here
    # (see api.idempotency.lease_token).
    response = models.TextField(blank=True, default="")
    created_at = models.DateTimeField()

    class Meta:
        app_label = "api"
        constraints = [
            models.UniqueConstraint(fields=["owner", "key"], name="api_idempotency_owner_key"),
        ]
        indexes = [models.Index(fields=["created_at"], name="api_idempotency_created")]

    def __str__(self) -> str:
        return f"{self.owner}: {self.key}"


class McpLease(models.Model):
    """The lease a ``/mcp`` caller holds on one goal, kept on the server so the
    model never sees it: not the token, only what derives it again.

    A lease granted through ``/mcp`` is issued under an Idempotency-Key the
    server chose (``key``), so its token is ``replayable_lease(owner, key,
    path)`` (ledger.services.tokens), an HMAC under SECRET_KEY: this row is
    no secret on its own, and every web process can rebuild the token. One
    row per holder (an API token or an OAuth grant) and goal.
    """

    holder = models.CharField(max_length=80)  # "token:<id>" or "oauth:<application>:<user>"
    goal_id = models.CharField(max_length=64)
    generation = models.PositiveIntegerField()
    owner = models.CharField(max_length=150)  # the username the token was derived for
    key = models.CharField(max_length=80)  # the Idempotency-Key's digest, as events hold it
    path = models.CharField(max_length=255)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "api"
        verbose_name = "MCP lease"
        constraints = [models.UniqueConstraint(fields=["holder", "goal_id"],
                                               name="mcp_lease_one_per_holder_goal")]

    def __str__(self) -> str:
        return f"{self.holder} holds generation {self.generation} of {self.goal_id}"


class OAuthAudit(models.Model):
    """What happened to a hosted connector's access, for an auditor: its
    registration, a person's consent (or refusal) naming the agent identity
    it acts as, each revocation, each replayed code or refresh token. Names
    and client ids only: tokens are stored by django-oauth-toolkit as SHA-256
    checksums, never here."""

    GRANTED, REFUSED, REVOKED = "granted", "refused", "revoked"
    # A client registered (dynamically or from its metadata document); an
    # authorization code or a rotated-away refresh token presented again,
    # whose tokens were revoked for it.
    REGISTERED, CODE_REUSED, REFRESH_REUSED = "registered", "code_reused", "refresh_reused"
    KINDS = ((GRANTED, GRANTED), (REFUSED, REFUSED), (REVOKED, REVOKED),
             (REGISTERED, REGISTERED), (CODE_REUSED, CODE_REUSED),
             (REFRESH_REUSED, REFRESH_REUSED))

    kind = models.CharField(max_length=16, choices=KINDS)
    client_id = models.CharField(max_length=100)
    client_name = models.CharField(max_length=255, blank=True, default="")
    agent = models.CharField(max_length=150, blank=True, default="")  # the identity it acts as
    by = models.CharField(max_length=150, blank=True, default="")  # who consented (or "client")
    recorded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "api"
        verbose_name = "OAuth grant or revocation"
        ordering = ("-recorded_at", "-id")

    def __str__(self) -> str:
        return f"{self.kind} {self.client_name or self.client_id} as {self.agent or '-'}"

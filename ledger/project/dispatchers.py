"""Which configured dispatchers hand over the lease their wake grants.

A fact every internal or operator wake's claim needs (push or pull, decided in
the domain on the locked state: ``ledger.domain.claims.pushed``), read from
``WAKELEDGER_DISPATCHERS``; ``scheduling.dispatch`` validates the whole
configuration at start-up and sends the dispatches.
"""

from django.conf import settings

# The OpenClaw Gateway preset posts a message that lands in the Gateway's
# transcripts: it carries no lease, so its wakes are pulled like "none".
OPENCLAW = "openclaw"


def names() -> frozenset[str]:
    """The dispatchers a goal may name (its ``policy.dispatch``, beside "none")."""
    return frozenset(settings.WAKELEDGER_DISPATCHERS)


def lease_dispatchers() -> frozenset[str]:
    config = settings.WAKELEDGER_DISPATCHERS
    return frozenset(name for name, spec in config.items()
                     if isinstance(spec, dict) and spec.get("preset") != OPENCLAW)

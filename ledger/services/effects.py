"""How the world outside the ledger keeps in step with its events: a shell
(the scheduling app) registers an effect that runs inside every command's
transaction, after its events are written (``ledger.eventstore.store.register_effect``
says why). Registered through here, so the shells never import the store."""

from ledger.eventstore import store
from ledger.eventstore.store import Outcome

__all__ = ["Effect", "Outcome", "register"]

Effect = store.Effect


def register(effect: Effect) -> None:
    store.register_effect(effect)

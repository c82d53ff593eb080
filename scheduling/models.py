"""The dispatch outbox's model is declared in ``ledger.models`` (labelled
``scheduling``, its table and migrations here, as always), so the use case
that records a dispatch in the claim's transaction writes it without
importing the scheduler's shell; it is named here too for the shell's code.

The module also exists because Django sends post_migrate only to apps with a
models module, and the lease sweeper's schedule is ensured on post_migrate.
"""

from ledger.models import Dispatch

__all__ = ["Dispatch"]

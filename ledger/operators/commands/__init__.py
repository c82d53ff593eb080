"""The `ledger` command's actions, one module per group (see base.py for what they share)."""

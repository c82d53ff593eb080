"""The application layer (ledger/services/): tokens, ids and callers, and
liveness judged through the use cases and the sweeper."""

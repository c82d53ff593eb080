"""The event store (ledger/eventstore/): one command one transaction, the
hash chain, append-only, replay and verify, SQLite's writer queue."""

"""The pure domain (ledger/domain/): its rules called directly, property
tests, the event codec and upcasters, failure texts. No database."""

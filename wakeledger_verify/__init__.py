"""Offline verification of Wake Ledger's verifiable log (docs/integrity.md).

Standalone on purpose: this package imports only the standard library and
``cryptography``, never Django or anything of the server, so an auditor can
run ``wakeledger-verify`` on a machine that never saw the database. The
server imports its Merkle hashing and record encoding from here (never the
other way round), so both sides hash the same bytes by construction.
"""

BUNDLE_FORMAT = "wakeledger-export/1"

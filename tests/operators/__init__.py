"""The operator surfaces (ledger/operators/, ledger/admin/): the admin, the
`ledger` command, terminal output, alerts."""

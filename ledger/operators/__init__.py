"""The operator surfaces: the terminal, the admin's timeline and dashboard, alerts, the
doctor, the demo, and the `ledger` command's actions (commands/)."""

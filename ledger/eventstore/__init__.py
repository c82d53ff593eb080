"""The event store: one command = one transaction (store), its hash chain, the
append-only triggers and their check, replay and verify (projection), the one clock
and the crash tests' fail points."""

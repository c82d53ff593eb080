"""The verifiable log (ledger/log/): Merkle proofs, sealing, signed heads,
and attacks on the stored history."""

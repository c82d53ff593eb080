"""The verifiable log: the stored Merkle tree, sealing, the signing key and signed
heads, `verify --against` a kept head, and the offline-verifiable export bundle."""

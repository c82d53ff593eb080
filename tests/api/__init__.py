"""The REST API (api/): endpoints, authorization, bad input, idempotency,
secrets, HTTP security and the OpenAPI contract."""

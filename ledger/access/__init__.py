"""Who may call the API and how often: roles, API tokens, failure throttles and
the admin login lockout (accounts); the one key derivation (derivation); the
tokens' and idempotency records' tables (models)."""

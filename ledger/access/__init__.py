"""Who may call the API and how often: roles, API tokens, idempotency records and
their housekeeping, failure throttles, the admin login lockout and the CSP."""

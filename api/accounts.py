"""Who may call the API and as what, for the ledger app's operator commands
and admin: roles, API tokens and idempotency housekeeping.

The one small module ``ledger`` imports from ``api`` (issue 10): the rest of
``api`` is the REST shell, which ``ledger`` never needs to know.
"""

from api.idempotency import prune as prune_idempotency_records
from api.models import ApiToken
from api.roles import AGENT, AUDITOR, OPERATOR, ROLES, role_of
from api.tokens import issue as issue_token

__all__ = ["AGENT", "AUDITOR", "OPERATOR", "ROLES", "ApiToken", "issue_token",
           "prune_idempotency_records", "role_of"]

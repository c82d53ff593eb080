"""Roles are Django groups: agent, auditor, operator.

- agent: sees and writes only its own goals (another agent's goal is a 404);
- auditor: reads everything, writes nothing;
- operator: what auditors do, plus the operator endpoints.
A superuser logged in to the admin counts as an operator.
"""

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

AGENT, AUDITOR, OPERATOR = "agent", "auditor", "operator"
ROLES = (AGENT, AUDITOR, OPERATOR)
# A user in several role groups has the first of these (api.tokens ranks
# them the same way in SQL).
PRIORITY = (OPERATOR, AUDITOR, AGENT)


def role_of(user: AbstractBaseUser | AnonymousUser | None) -> str | None:
    """The user's role, looked up once per user object: a bearer-token
    caller's comes with its token (api.tokens.authenticate fills the cache
    from the same query); an admin session's user costs one groups query."""
    if user is None or not user.is_authenticated:
        return None
    cached = getattr(user, "_wakeledger_role", False)
    if cached is not False:
        return cached
    if user.is_superuser:
        role = OPERATOR
    else:
        names = set(user.groups.values_list("name", flat=True))
        role = next((r for r in PRIORITY if r in names), None)
    user._wakeledger_role = role
    return role

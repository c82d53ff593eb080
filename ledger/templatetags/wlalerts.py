"""The admin home's count of goals that need a person (the dashboard's list),
and the verifiable log's problems (its alarm) beside it."""

from django import template

from ledger.models import Goal
from ledger.services import alerts, loghealth

register = template.Library()


@register.simple_tag
def needing_a_person() -> int:
    """How many goals need a person now: the /alerts query's SQL count."""
    return alerts.count(Goal.objects.all())


@register.simple_tag
def log_problems() -> list[str]:
    """What keeps the log from reading as verified (services.loghealth)."""
    return loghealth.log_problems()

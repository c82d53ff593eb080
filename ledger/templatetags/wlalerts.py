"""The admin home's count of goals that need a person (the dashboard's list)."""

from django import template

from ledger.models import Goal
from ledger.services import alerts

register = template.Library()


@register.simple_tag
def needing_a_person() -> int:
    """How many goals need a person now: the /alerts query's SQL count."""
    return alerts.count(Goal.objects.all())

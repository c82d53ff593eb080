"""django-q2's ORM broker, taking the oldest queued task first.

django-q2's ``ORM.dequeue`` (django_q/brokers/orm.py, 1.11) reads
``OrmQ.objects.filter(key=…, lock__lt=now)[:bulk]``: a ``LIMIT`` without an
``ORDER BY`` (``OrmQ`` declares no ordering). PostgreSQL then answers in the
table's physical order, and once (auto)vacuum has freed the space of
acknowledged tasks, new tasks are written into the first pages: under a
backlog a wake queued early can be overtaken by every newer one, for as long
as the backlog lasts — a watchdog's slot or a ``timeout_recovery`` wake left
behind by the sweeper's and the wakes' own newer tasks (docs/liveness.md,
"The queue's order"). SQLite happens to scan in rowid order, which hid it.

Every query of the broker goes through ``get_connection``; ordering its
queryset by the primary key makes ``dequeue`` take the oldest queued task
(ids grow with ``enqueue``; a task handed out again after ``retry`` keeps its
id, so it comes first once visible again). The primary key's index serves the
order: a dequeue reads from the oldest row and skips only the tasks in flight.
Counts, updates and deletes ignore the order. Configured as
``Q_CLUSTER["broker_class"]`` (ledger/project/settings.py).
"""

from django.db.models import QuerySet
from django_q.brokers.orm import ORM
from django_q.models import OrmQ


class OldestFirstORM(ORM):
    """The ORM broker with its queue read oldest first."""

    @staticmethod
    def get_connection(list_key: str | None = None) -> QuerySet[OrmQ]:
        return ORM.get_connection(list_key).order_by("id")

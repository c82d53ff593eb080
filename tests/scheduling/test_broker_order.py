"""The ORM broker takes the oldest queued task first (scheduling/broker.py).

django-q2's own ``ORM.dequeue`` reads its queue without ORDER BY, so on
PostgreSQL it answers in the table's physical order. After (auto)vacuum frees
the space of acknowledged tasks, newer tasks are written before older ones:
under a backlog an older wake is overtaken. These tests build that layout on
the real database and dequeue with the broker's own code."""

from uuid import uuid4

import pytest
from django.db import connection
from django_q.brokers import get_broker
from django_q.brokers.orm import ORM
from django_q.models import OrmQ
from django_q.signing import SignedPackage

from scheduling.broker import OldestFirstORM

KEY = "wakeledger"
BACKLOG = 120  # queued tasks; the first half acknowledged, then vacuumed
NEWER = 10  # tasks queued after the vacuum, written into the freed pages


def _enqueue(broker: ORM, name: str) -> int:
    # A payload of the size of a real wake's package (its kwargs, the signed
    # envelope), so the queue spans many pages.
    task = {"id": uuid4().hex, "name": name, "func": "scheduling.tasks.fire_wake",
            "args": (), "kwargs": {"goal_id": str(uuid4()), "pad": "x" * 600}}
    return broker.enqueue(SignedPackage.dumps(task))


def _backlog_with_newer_tasks_first() -> list[int]:
    """A backlog whose newer tasks lie physically before its older ones, as a
    busy queue on PostgreSQL gets it: tasks queued, the first half taken and
    acknowledged, autovacuum's work (VACUUM), then new tasks from another
    connection land in the freed pages. The ids of the queued tasks."""
    broker = ORM(list_key=KEY)
    queued = [_enqueue(broker, f"old-{i}") for i in range(BACKLOG)]
    for pk in queued[:BACKLOG // 2]:
        broker.acknowledge(pk)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM django_q_ormq")
    # A new backend: its first insert asks the free space map, not the last
    # page it wrote to.
    connection.close()
    queued = queued[BACKLOG // 2:] + [_enqueue(broker, f"new-{i}") for i in range(NEWER)]
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM django_q_ormq ORDER BY ctid LIMIT 1")
        first_on_disk = cursor.fetchone()[0]
    # The layout that overtakes: the table's first row is not its oldest task.
    if first_on_disk == min(queued):  # not an assert: the stock broker's xfail is the order's
        pytest.fail("the setup failed: the newer tasks did not land before the older ones")
    return queued


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("broker_class", [
    pytest.param(ORM, marks=pytest.mark.xfail(
        strict=True, raises=AssertionError,
        reason="django-q2's ORM broker dequeues without ORDER BY: on PostgreSQL a newer task "
               "overtakes an older one (why scheduling/broker.py exists; if this passes, "
               "django-q2 fixed it)")),
    OldestFirstORM,
], ids=["django-q2-orm", "oldest-first"])
def test_a_backlog_is_taken_oldest_first_on_postgresql(broker_class: type[ORM]) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the physical order that lets a newer task overtake is PostgreSQL's "
                    "(SQLite scans in rowid order)")
    queued = _backlog_with_newer_tasks_first()
    broker = broker_class(list_key=KEY)
    taken: list[int] = []
    while len(taken) < len(queued):
        got = broker.dequeue()
        assert got, f"the broker stopped with {len(queued) - len(taken)} task(s) queued"
        taken += [pk for pk, _payload in got]
    assert taken == sorted(queued)
    # Taken, not acknowledged: each is hidden until the cluster's retry.
    assert broker.queue_size() == 0 and broker.lock_size() == len(queued)


@pytest.mark.django_db
def test_the_cluster_uses_the_oldest_first_broker() -> None:
    """What the qcluster, the scheduler pass and the tasks' enqueue all get."""
    broker = get_broker()
    assert isinstance(broker, OldestFirstORM)
    first, second = _enqueue(broker, "first"), _enqueue(broker, "second")
    assert [pk for pk, _ in broker.dequeue()] == [first]
    assert [pk for pk, _ in broker.dequeue()] == [second]
    assert OrmQ.objects.filter(key=KEY).count() == 2

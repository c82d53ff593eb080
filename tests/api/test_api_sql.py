"""api/sql.py: the token's and the key's statements run on the driver's
cursor unless something observes the connection, and keep what Django's
cursor guarantees either way: errors as Django's, a broken transaction
refused, the same rows."""

from contextlib import nullcontext

import pytest
from django.db import DatabaseError, connection, transaction
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext

from api import auth, sql

pytestmark = pytest.mark.django_db

SELECT = "SELECT %s + %s, %s"


def test_unobserved_statements_skip_django_s_cursor(monkeypatch):
    connection.ensure_connection()

    def no_wrapper(*_):
        raise AssertionError("Django's cursor used while nothing observed")

    monkeypatch.setattr(connection, "cursor", no_wrapper)
    assert sql.fetchone(SELECT, [1, 2, "x"]) == (3, "x")


def test_observed_statements_are_seen_and_answer_the_same():
    unobserved = sql.fetchone(SELECT, [1, 2, "x"])
    with CaptureQueriesContext(connection) as queries:
        assert sql.fetchone(SELECT, [1, 2, "x"]) == unobserved
    assert len(queries.captured_queries) == 1
    seen = []

    def count(execute, query, params, many, context):
        seen.append(query)
        return execute(query, params, many, context)

    with connection.execute_wrapper(count):
        assert sql.fetchone(SELECT, [1, 2, "x"]) == unobserved
    assert seen == [SELECT]


@pytest.mark.parametrize("observed", [False, True], ids=["driver", "django"])
def test_driver_errors_are_django_s(observed):
    with CaptureQueriesContext(connection) if observed else nullcontext():
        with pytest.raises(DatabaseError):
            sql.fetchone("SELECT nothing FROM no_such_table WHERE x = %s", [1])
        with pytest.raises(DatabaseError):
            sql.rowcount("UPDATE no_such_table SET x = %s", [1])


@pytest.mark.django_db(transaction=True)
def test_a_statement_in_a_failed_transaction_is_refused():
    with transaction.atomic():
        with pytest.raises(DatabaseError), transaction.atomic(savepoint=False):
            sql.fetchone("SELECT nothing FROM no_such_table WHERE x = %s", [1])
        with pytest.raises(TransactionManagementError):
            sql.fetchone(SELECT, [1, 2, "x"])


def test_the_token_lookup_is_the_same_on_either_path(agent):
    plain = auth.authenticate(agent.token)
    with CaptureQueriesContext(connection):
        observed = auth.authenticate(agent.token)
    assert (plain.pk, plain.user.pk, plain.user._wakeledger_role) == \
        (observed.pk, observed.user.pk, observed.user._wakeledger_role)
    assert auth.authenticate(agent.token[:-1] + "#") is None

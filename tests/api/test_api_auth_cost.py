"""The cheap request path keeps every rule of the expensive one.

Bearer authentication reads the token, its user and the user's role in one
statement with nothing cached between requests: a revoked token, a
deactivated user, a role change or a removal from every group shows on the
very next request. Request serializers share one field tree per class and
must answer exactly what a freshly built DRF serializer answers.
"""

import itertools
import json
import threading

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from api import auth
from api import serializers as s
from ledger.access import accounts
from ledger.access.accounts import AGENT, AUDITOR, OPERATOR, role_of
from ledger.access.models import ApiToken
from ledger.eventstore import clock
from tests.conftest import Api

pytestmark = pytest.mark.django_db

# "auth_user" also matches auth_user_groups.
AUTH_TABLES = ("api_apitoken", "auth_user", "auth_group")


def checkpoint(api: Api, gid: str, lease: dict, key: str | None = None):
    return api.post(f"goals/{gid}/checkpoints",
                    {"lease": lease, "current_step": "tests written", "progress_pct": 40},
                    key=key)


@pytest.fixture
def started(agent):
    body = agent.start().json()
    return body["goal"]["id"], {"token": body["lease"]["token"],
                                "generation": body["lease"]["generation"]}


def user(api: Api):
    return get_user_model().objects.get(username=api.username)


def problem(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["code"] == code
    return body


# ------------------------------------------------------------------ one query


@pytest.mark.parametrize("key", [None, "cost-1"], ids=["no key", "Idempotency-Key"])
def test_an_authenticated_checkpoint_reads_token_user_and_role_in_one_statement(
        agent, started, key, monkeypatch):
    gid, lease = started
    monkeypatch.setattr(accounts, "NOT_LOCKED_MEMO_SECONDS", 60)  # however slow the machine
    monkeypatch.setattr(accounts, "_not_locked", {})
    for request in ("first", "next"):
        with CaptureQueriesContext(connection) as queries:
            response = checkpoint(agent, gid, lease, key=key and f"{key}-{request}")
        assert response.status_code == 201, response.content
        statements = [q["sql"] for q in queries.captured_queries]
        auth = [sql for sql in statements if any(t in sql for t in AUTH_TABLES)]
        # The token, its user and the best role among the user's groups: one
        # statement, and no groups query after it (role_of reads its cache).
        assert len(auth) == 1, auth
        assert "api_apitoken" in auth[0] and "auth_user_groups" in auth[0]
        first = statements.index(auth[0])
        if request == "first":
            # Besides it, authentication reads only the bad-token throttle's
            # lock (the shared cache), before it.
            assert first == 1 and "wakeledger_cache" in statements[0], statements[:3]
        else:
            # The address's "not locked out" is kept in the process for a
            # while (ledger/access/accounts.py): the cache is not read again.
            assert first == 0, statements[:3]
            assert not any("wakeledger_cache" in sql for sql in statements), statements


@pytest.mark.parametrize("path", ["goals", "goals/{gid}", "goals/{gid}/events", "alerts"])
def test_reads_use_the_same_single_auth_statement(agent, started, path):
    # visible_goals, the view's role_of and get_username() all read the
    # request user the token statement built: no second look at the accounts.
    gid, _ = started
    with CaptureQueriesContext(connection) as queries:
        assert agent.get(path.format(gid=gid)).status_code == 200
    auth = [q["sql"] for q in queries.captured_queries
            if any(t in q["sql"] for t in AUTH_TABLES)]
    assert len(auth) == 1 and "auth_user_groups" in auth[0], auth


def test_role_of_on_the_request_user_costs_no_query(agent, django_assert_num_queries):
    with django_assert_num_queries(1):
        found = auth.authenticate(agent.token)
    with django_assert_num_queries(0):
        assert role_of(found.user) == AGENT
        assert found.user.get_username() == agent.username
        assert found.user.is_authenticated and found.user.is_active
        assert not found.user.is_superuser


def test_the_request_user_is_a_real_user_whose_other_fields_load_on_use(agent):
    stored = user(agent)
    stored.email = "agent@example.org"
    stored.save()
    found = auth.authenticate(agent.token)
    assert isinstance(found.user, get_user_model())
    assert found.user.pk == stored.pk and found.user == stored
    assert found.user.is_superuser is False and found.user.is_active is True
    assert found.user.email == "agent@example.org"  # deferred: one query, the right value
    assert list(found.user.groups.values_list("name", flat=True)) == [AGENT]
    assert found.pk == ApiToken.objects.get(user=stored).pk and found.user_id == stored.pk
    assert str(found).startswith(agent.token.split("_")[1])


def test_the_token_and_user_are_built_as_from_db_builds_them(agent):
    """The request's token and user are what the ORM makes from a row
    (``Model.from_db``): the same deferred fields, loaded, from the default
    database."""
    found = auth.authenticate(agent.token)
    via_orm = get_user_model().objects.only("id", "username", "is_active", "is_superuser") \
        .get(username=agent.username)
    assert found.user.get_deferred_fields() == via_orm.get_deferred_fields()
    assert not found._state.adding and found._state.db == via_orm._state.db
    assert not found.user._state.adding and found.user._state.db == via_orm._state.db
    assert found.get_deferred_fields() == {
        f.attname for f in ApiToken._meta.concrete_fields} - {"id", "user_id", "prefix"}
    assert found.user is found.user and found.user_id == via_orm.pk


# ------------------------------------------------ nothing stale between requests


def test_a_revoked_token_is_401_on_the_next_request(agent, started):
    gid, lease = started
    assert checkpoint(agent, gid, lease).status_code == 201
    ApiToken.objects.filter(user=user(agent)).update(revoked_at=clock.now())
    problem(checkpoint(agent, gid, lease), 401, "unauthenticated")
    problem(agent.get(f"goals/{gid}"), 401, "unauthenticated")


def test_a_deactivated_user_is_401_on_the_next_request_and_back_when_reactivated(
        agent, started):
    gid, _ = started
    assert agent.get(f"goals/{gid}").status_code == 200
    get_user_model().objects.filter(username=agent.username).update(is_active=False)
    problem(agent.get(f"goals/{gid}"), 401, "unauthenticated")
    get_user_model().objects.filter(username=agent.username).update(is_active=True)
    assert agent.get(f"goals/{gid}").status_code == 200


def test_a_role_change_takes_effect_on_the_next_request(agent, started):
    gid, lease = started
    assert checkpoint(agent, gid, lease).status_code == 201
    # From the group's side (the reverse relation, no signal on the user).
    Group.objects.get(name=AGENT).user_set.remove(user(agent))
    user(agent).groups.add(Group.objects.get(name=AUDITOR))
    problem(checkpoint(agent, gid, lease), 403, "forbidden")  # an auditor writes nothing
    assert agent.get(f"goals/{gid}/events").status_code == 200  # but reads
    # Back to agent through the through table directly (bulk, no m2m signal).
    through = get_user_model().groups.through
    through.objects.filter(user=user(agent)).delete()
    through.objects.create(user=user(agent), group=Group.objects.get(name=AGENT))
    assert checkpoint(agent, gid, lease).status_code == 201


def test_a_user_removed_from_every_group_is_403_on_the_next_request(agent, started):
    gid, lease = started
    assert agent.get(f"goals/{gid}").status_code == 200
    user(agent).groups.clear()
    body = problem(agent.get(f"goals/{gid}"), 403, "forbidden")
    assert "no role" in body["detail"]
    problem(checkpoint(agent, gid, lease), 403, "forbidden")


def test_a_deleted_role_group_strips_the_role_on_the_next_request(agent, started):
    # Deleting a group cascades to the membership rows without any m2m signal.
    gid, _ = started
    Group.objects.filter(name=AGENT).delete()
    problem(agent.get(f"goals/{gid}"), 403, "forbidden")


def test_becoming_a_superuser_makes_an_operator_on_the_next_request(agent, started):
    gid, _ = started
    problem(agent.post(f"goals/{gid}/stop", {"reason": "wrong repo"}), 403, "forbidden")
    get_user_model().objects.filter(username=agent.username).update(is_superuser=True)
    assert agent.post(f"goals/{gid}/stop", {"reason": "wrong repo"}).status_code == 200


GROUP_SETS = [set(c) for n in range(4)
              for c in itertools.combinations((AGENT, AUDITOR, OPERATOR, "staff"), n)]


@pytest.mark.parametrize("superuser", [False, True])
def test_the_role_from_the_token_query_is_role_of_for_every_membership(superuser):
    """The SQL ranking and roles.role_of's own rules (superuser = operator,
    else the first of PRIORITY among the groups) agree, for every mix."""
    for index, names in enumerate(GROUP_SETS):
        person = get_user_model().objects.create(username=f"u{index}-{superuser}",
                                                 is_superuser=superuser)
        person.groups.set([Group.objects.get_or_create(name=n)[0] for n in names])
        found = auth.authenticate(accounts.issue_token(person))
        expected = role_of(get_user_model().objects.get(pk=person.pk))
        assert found.user._wakeledger_role == expected, names
        assert role_of(found.user) == expected


def test_an_unknown_prefix_still_pays_for_the_digest_comparison(agent, monkeypatch):
    compared = []
    real = auth.hmac.compare_digest
    monkeypatch.setattr(auth.hmac, "compare_digest",
                        lambda a, b: compared.append(a) or real(a, b))
    prefix = agent.token.split("_")[1]
    assert auth.authenticate(agent.token.replace(prefix, "Zz9Zz9Zz")) is None
    assert auth.authenticate(agent.token[:-1] + ("A" if agent.token[-1] != "A" else "B")) \
        is None
    assert auth.authenticate(agent.token) is not None
    assert compared[0] == "0" * 64 and len(compared) == 3


def test_a_bad_token_is_still_counted_by_the_throttle(db, settings):
    settings.WAKELEDGER_BAD_TOKEN_LIMIT = 3
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer wl_Zz9Zz9Zz_nope")
    assert [client.get("/api/v1/goals").status_code for _ in range(4)] == [401, 401, 401, 429]


# ------------------------------------------------------------ shared field tree


REQUEST_SERIALIZERS = sorted(
    (c for c in vars(s).values()
     if isinstance(c, type) and issubclass(c, s.StrictSerializer) and c is not s.StrictSerializer),
    key=lambda c: c.__name__)


def answer(serializer) -> tuple:
    valid = serializer.is_valid()
    return valid, json.dumps(serializer.validated_data if valid else serializer.errors,
                             sort_keys=True, default=repr)


def fresh(cls, data):
    """A serializer that builds its own fields as DRF does (a context opts out)."""
    made = cls(data=data, context={"fresh": True})
    assert made.fields is not cls(data=data).fields
    return made


def test_request_serializers_share_one_field_tree_and_not_with_context_or_instances():
    one, two = s.CheckpointSerializer(data={}), s.CheckpointSerializer(data={})
    assert one.fields is two.fields
    assert s.CheckpointSerializer().fields is not one.fields  # schema generation, no data
    assert s.CheckpointSerializer(data={}, context={"x": 1}).fields is not one.fields
    assert s.CheckpointSerializer(data={}, partial=True).fields is not one.fields
    assert s.FencedSerializer(data={}).fields is not one.fields  # per class, not inherited
    assert "current_step" not in s.FencedSerializer(data={}).fields


VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 200) | st.floats(allow_nan=False)
    | st.text(max_size=12) | st.sampled_from(["0" * 64, "ok", "", " ", "a/b", "UTC"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["token", "generation", "path", "sha256", "bytes", "in_seconds",
                         "at", "reason", "x"]), inner, max_size=4),
    max_leaves=12)


def bodies(cls) -> st.SearchStrategy:
    names = [*sorted(cls().fields), "unknown_field"]
    return st.dictionaries(st.sampled_from(names), VALUES, max_size=len(names))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
@pytest.mark.slow  # real processes or many examples: not in make test-quick
def test_a_shared_tree_answers_exactly_what_a_fresh_drf_serializer_answers(data):
    cls = data.draw(st.sampled_from(REQUEST_SERIALIZERS))
    body = data.draw(st.one_of(bodies(cls), VALUES))
    assert answer(cls(data=body)) == answer(fresh(cls, body))


def test_a_valid_checkpoint_validates_the_same_and_leaves_the_tree_unchanged():
    body = {"lease": {"token": "wll_x", "generation": 2}, "current_step": "s",
            "progress_pct": 7, "artifacts": [{"path": "a", "sha256": "0" * 64, "bytes": 1}],
            "wake": {"in_seconds": 600}}
    first = s.CheckpointSerializer(data=body)
    assert first.is_valid(), first.errors
    first.validated_data["completed"].append("mutated")  # a default list is per call
    again = s.CheckpointSerializer(data=body)
    assert again.is_valid() and again.validated_data["completed"] == []
    assert answer(again) == answer(fresh(s.CheckpointSerializer, body))


def test_threads_validating_at_once_each_get_their_own_answer():
    good = {"lease": {"token": "wll_x", "generation": 2}, "current_step": "s",
            "progress_pct": 7}
    bad = {**good, "progress_pct": 700, "lease": {"token": 5}}
    expected = {id(good): answer(fresh(s.CheckpointSerializer, good)),
                id(bad): answer(fresh(s.CheckpointSerializer, bad))}
    wrong = []
    barrier = threading.Barrier(4)

    def work(body):
        barrier.wait()
        for _ in range(300):
            if answer(s.CheckpointSerializer(data=body)) != expected[id(body)]:
                wrong.append(body)

    threads = [threading.Thread(target=work, args=(b,)) for b in (good, bad, good, bad)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong

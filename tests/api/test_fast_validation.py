"""Request bodies accepted in one pass (api/serializers/fast.py) get exactly
what DRF would give them, and everything else is DRF's to answer.

The property: for every request serializer and any body — valid, nearly
valid (one field over a limit, blank, null, padded, of a neighbouring type)
or junk — the one-pass checks either step aside or answer what a freshly
built DRF serializer validates the body to, value for value and type for
type. The examples below show they do not step aside for the bodies agents
send every minute.
"""

from collections import Counter
from typing import Any

import pytest
from django.core import validators as dj
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework import serializers as drf

from api import serializers as s
from api.serializers import fast

pytestmark = pytest.mark.django_db

# An agent's everyday checkpoint (the one bench/http_checkpoint.py posts).
BODY = {
    "current_step": "running the integration tests against the staging database",
    "progress_pct": 40,
    "completed": ["reproduced the failure locally", "wrote a failing test"],
    "next_actions": ["fix the race in the checkout handler", "open the pull request"],
    "note": "the flake shows up about once in twenty runs",
}

REQUEST_SERIALIZERS = sorted(
    (c for c in vars(s).values()
     if isinstance(c, type) and issubclass(c, s.StrictSerializer) and c is not s.StrictSerializer),
    key=lambda c: c.__name__)
COMPILED = [c for c in REQUEST_SERIALIZERS if fast.compiled(c) is not None]
JUNK = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) \
    | st.sampled_from(["", " ", "5", "true", [], {}, ["x"], {"x": 1}])


def limit(field: drf.Field, kind: type) -> Any:
    return next((v.limit_value for v in field.validators if type(v) is kind), None)


TEXT = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")


def valid(field: drf.Field) -> st.SearchStrategy:
    """Values ``field`` accepts."""
    if isinstance(field, s.StrictSerializer):
        return body(field)
    if isinstance(field, drf.ListField):
        return st.lists(valid(field.child), max_size=min(3, limit(field, dj.MaxLengthValidator)
                                                         or 3))
    if isinstance(field, drf.ChoiceField):
        return st.sampled_from(sorted(field.choice_strings_to_values))
    if isinstance(field, drf.BooleanField):
        return st.booleans()
    if isinstance(field, drf.IntegerField):
        low = limit(field, dj.MinValueValidator)
        high = limit(field, dj.MaxValueValidator)
        return st.integers(low, high)
    if isinstance(field, drf.RegexField):
        return st.text("0123456789abcdef", min_size=64, max_size=64)
    if isinstance(field, drf.CharField):
        longest = limit(field, dj.MaxLengthValidator) or 20
        texts = st.text(TEXT, min_size=1, max_size=min(longest, 12)) | st.just("x" * longest)
        return (texts | st.just("")) if field.allow_blank else texts
    return JUNK


def near(field: drf.Field) -> st.SearchStrategy:
    """Values just past one of ``field``'s rules, or of another type."""
    if isinstance(field, s.StrictSerializer):
        return body(field, wrong=True) | JUNK
    if isinstance(field, drf.ListField):
        longest = limit(field, dj.MaxLengthValidator) or 5
        return st.lists(valid(field.child), max_size=2).flatmap(
            lambda items: near(field.child).map(lambda bad: [*items, bad])) | st.lists(
            valid(field.child), min_size=longest + 1, max_size=longest + 1) | JUNK
    if isinstance(field, drf.IntegerField):
        low = limit(field, dj.MinValueValidator)
        high = limit(field, dj.MaxValueValidator)
        edges = [2**70, -(2**70), 3.0, "3", True]
        edges += [low - 1] if low is not None else []
        edges += [high + 1] if high is not None else []
        return st.sampled_from(edges) | JUNK
    if isinstance(field, drf.BooleanField):
        return st.sampled_from([0, 1, "true", None])
    if isinstance(field, drf.CharField):
        longest = limit(field, dj.MaxLengthValidator) or 20
        pattern = "0" * 64 if isinstance(field, drf.RegexField) else "a"
        return st.sampled_from([
            pattern + "\n", f" {pattern}", f"{pattern} ", "x" * (longest + 1), "",
            "a\x00b", "a\ud800b", "0" * 63 + "\x00", "0" * 63 + "\ud800", "\t", 5, 2.5,
            None]) | JUNK
    return JUNK


def body(serializer: drf.Serializer, wrong: bool = False) -> st.SearchStrategy:
    """A valid body, or (``wrong``) one wrong in exactly one place: a field
    (perhaps deep inside), a required field missing, or an unknown field."""
    fields = {name: f for name, f in serializer.fields.items() if not f.read_only}

    def build(bad: str) -> st.SearchStrategy:
        required, optional = {}, {}
        for name, f in fields.items():
            if name == bad:
                required[name] = near(f)
            elif f.required and bad != f"missing {name}":
                required[name] = valid(f)
            elif not f.required:
                optional[name] = valid(f)
        if bad == "unknown":
            required["unknown_field"] = JUNK
        return st.fixed_dictionaries(required, optional=optional)

    if not wrong:
        return build("")
    places = [*fields, "unknown", *(f"missing {n}" for n, f in fields.items() if f.required)]
    return st.sampled_from(places).flatmap(build)


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (True is not 1)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def drf_answer(cls: type, body: Any) -> tuple[bool, Any]:
    made = cls(data=body, context={"fresh": True})  # builds its own fields, as DRF does
    valid = made.is_valid()
    return valid, made.validated_data if valid else made.errors


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_an_accepted_body_is_what_drf_validates_it_to(data):
    cls = data.draw(st.sampled_from(COMPILED))
    sent = data.draw(st.one_of(body(cls()), body(cls(), wrong=True), JUNK))
    accepted = fast.accepted(cls, sent)
    ok, expected = drf_answer(cls, sent)
    if accepted is not None:
        assert ok, (sent, expected)
        assert same(accepted, expected), (accepted, expected)
    TALLY[accepted is not None, ok] += 1


TALLY: Counter = Counter()


def test_the_property_saw_both_answers():
    # Run after the property (file order): it tried bodies of each kind.
    if not TALLY:
        pytest.skip("the property test did not run in this session")
    assert TALLY[True, True] > 30 and TALLY[False, False] > 30, TALLY


def example(field: drf.Field) -> Any:
    """One valid value of ``field``, the longest text it takes."""
    if isinstance(field, s.StrictSerializer):
        return {name: example(f) for name, f in field.fields.items() if not f.read_only}
    if isinstance(field, drf.ListField):
        return [example(field.child)]
    if isinstance(field, drf.ChoiceField):
        return sorted(field.choice_strings_to_values)[-1]
    if isinstance(field, drf.BooleanField):
        return True
    if isinstance(field, drf.IntegerField):
        return limit(field, dj.MaxValueValidator) or limit(field, dj.MinValueValidator) or 7
    if isinstance(field, drf.RegexField):
        return "0" * 64
    return "x" * (limit(field, dj.MaxLengthValidator) or 20)


def wrongs(field: drf.Field) -> list[Any]:
    """Values of ``field`` each wrong in one way (or right in an odd one)."""
    junk: list[Any] = [None, True, 0, 2.5, "", " ", "5", [], {}, ["x"], {"x": 1}]
    if isinstance(field, s.StrictSerializer):
        good = example(field)
        return junk + [{**good, "unknown_field": 1}] + [
            {k: v for k, v in good.items() if k != name} for name in good] + [
            {**good, name: bad} for name, f in field.fields.items() if not f.read_only
            for bad in wrongs(f)]
    if isinstance(field, drf.ListField):
        longest = limit(field, dj.MaxLengthValidator) or 5
        return junk + [[example(field.child)] * (longest + 1)] + [
            [example(field.child), bad] for bad in wrongs(field.child)]
    if isinstance(field, drf.IntegerField):
        edges = [2**70, -(2**70), 3.0, "3", False]
        low, high = limit(field, dj.MinValueValidator), limit(field, dj.MaxValueValidator)
        return junk + edges + ([low - 1] if low is not None else []) + (
            [high + 1] if high is not None else [])
    if isinstance(field, drf.CharField):
        good = example(field)
        return [*junk, good + "x", good[:-1] + "\x00", good[:-1] + "\ud800", good[:-1] + "\n",
                " " + good[1:], good[1:] + " ", " " + good, good + "\n", "\t", 5]
    return junk


@pytest.mark.parametrize("cls", COMPILED, ids=lambda c: c.__name__)
def test_every_body_wrong_in_one_place_is_drfs_or_drfs_value(cls):
    field = cls()
    bodies = [example(field), {}, *wrongs(field)]
    for sent in bodies:
        accepted = fast.accepted(cls, sent)
        ok, expected = drf_answer(cls, sent)
        if accepted is not None:
            assert ok, (sent, expected)
            assert same(accepted, expected), (accepted, expected)
    assert fast.accepted(cls, example(field)) is not None


def lease(generation: int = 2) -> dict:
    return {"token": "wll_" + "t" * 40, "generation": generation}


EVERYDAY = [
    (s.CheckpointSerializer, {**BODY, "lease": lease()}),
    (s.CheckpointSerializer, {"lease": lease(), "current_step": "s", "progress_pct": 0,
                              "artifacts": [{"path": "a.py", "sha256": "0" * 64, "bytes": 1}],
                              "release_lease": True, "wake": {"in_seconds": 600}}),
    (s.FencedSerializer, {"lease": lease()}),
    (s.ReleaseSerializer, {"lease": lease(), "wake": {"in_seconds": 900,
                                                      "reason": "timeout_recovery"}}),
    (s.EmptySerializer, {}),
    (s.RunGoalSerializer, {"goal_key": "k", "workspace": "/w", "objective": "o",
                           "done_criteria": ["tests pass"], "policy": {"lease_seconds": 600}}),
]


@pytest.mark.parametrize(("cls", "body"), EVERYDAY, ids=lambda v: getattr(v, "__name__", ""))
def test_everyday_bodies_take_the_one_pass_path_with_drfs_values(cls, body):
    accepted = fast.accepted(cls, body)
    assert accepted is not None
    valid, expected = drf_answer(cls, body)
    assert valid and same(accepted, expected)
    assert s.validated(cls, body) == expected


def test_a_refused_body_gets_drfs_own_errors():
    body = {**BODY, "lease": lease(), "progress_pct": 101, "note": "x" * 10_000,
            "typo": 1}
    assert fast.accepted(s.CheckpointSerializer, body) is None
    with pytest.raises(drf.ValidationError) as refused:
        s.validated(s.CheckpointSerializer, body)
    assert refused.value.detail == drf_answer(s.CheckpointSerializer, body)[1]


def test_defaults_are_fresh_per_call():
    first = s.validated(s.CheckpointSerializer, {"lease": lease(), "current_step": "s",
                                                 "progress_pct": 1})
    first["completed"].append("mutated")
    again = s.validated(s.CheckpointSerializer, {"lease": lease(), "current_step": "s",
                                                 "progress_pct": 1})
    assert again["completed"] == []


class _WithHook(s.StrictSerializer):
    name = s.text(10)

    def validate_name(self, value: str) -> str:
        return value.upper()


class _WithOddField(s.StrictSerializer):
    when = drf.DateTimeField()


@pytest.mark.parametrize("cls", [_WithHook, _WithOddField, s.FinishSerializer])
def test_a_shape_with_hooks_or_unknown_fields_is_always_drfs(cls):
    assert fast.compiled(cls) is None
    assert fast.accepted(cls, {"name": "a"}) is None


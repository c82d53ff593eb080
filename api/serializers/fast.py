"""``validated``: a well-formed body accepted in one pass, anything else by DRF.

DRF validates a body field by field through several layers of method calls
per value (about 45 µs of CPU for a checkpoint, the largest share of the
request path after the command and the SQL). A request shape built from the
strict fields of fields.py (strict text, whole numbers, booleans, lists,
choices, regexes, nested strict serializers; no ``validate`` hooks, no
validators we do not know) is compiled once into plain checks. A body that
passes every one of them gets exactly the values DRF would give it; at the
first doubt (a wrong type, a blank, a limit, an unknown key, a value DRF
would coerce, a null) the checks give up and DRF validates the body, so
every refusal, its message and its code are still DRF's own. A shape the
compiler does not know is always DRF's. tests/api/test_fast_validation.py
holds the two to the same answers, for every request serializer.
"""

from collections.abc import Callable
from typing import Any

from django.core import validators as dj
from rest_framework import serializers
from rest_framework.fields import empty
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from api.serializers.fields import (
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
    StrictSerializer,
    _NoSurrogates,
)
from ledger.services import inputs

_DRF = object()  # "let DRF decide": never a validated value
Check = Callable[[Any], Any]  # a value -> its validated value, or _DRF

# Within these, int(str(n)) is n: DRF's IntegerField goes through str().
_INT_RANGE = range(-(2**63), 2**63)
# Validators the text check applies itself (all of them, always).
_TEXT_VALIDATORS = (dj.MaxLengthValidator, dj.MinLengthValidator,
                    dj.ProhibitNullCharactersValidator, ProhibitSurrogateCharactersValidator,
                    _NoSurrogates, dj.RegexValidator)


class _Unsupported(Exception):
    """A shape (or part of one) the compiler does not model: DRF validates it."""


def _limits(field: serializers.Field, allowed: tuple[type, ...]) -> dict[type, Any]:
    """The field's validators by type; any other validator, or two of a
    kind, and the field is DRF's."""
    found: dict[type, Any] = {}
    for validator in field.validators:
        kind = type(validator)
        if kind not in allowed or kind in found or callable(
                getattr(validator, "limit_value", None)):
            raise _Unsupported
        found[kind] = validator
    return found


def _bound(found: dict[type, Any], kind: type) -> Any:
    return found[kind].limit_value if kind in found else None


def _text(field: serializers.CharField) -> Check:
    found = _limits(field, _TEXT_VALIDATORS)
    regex = found.get(dj.RegexValidator)
    if regex is not None and regex.inverse_match:
        raise _Unsupported
    pattern = regex.regex if regex is not None else None
    longest, shortest = _bound(found, dj.MaxLengthValidator), _bound(found, dj.MinLengthValidator)
    allow_blank, trim = field.allow_blank, field.trim_whitespace

    def check(value: Any) -> Any:
        if type(value) is not str:
            return _DRF  # DRF turns numbers into text, or refuses
        if not value:
            return "" if allow_blank else _DRF
        if trim and value.strip() != value:
            return _DRF
        if (longest is not None and len(value) > longest) or (
                shortest is not None and len(value) < shortest):
            return _DRF
        # Null characters and lone surrogates are refused by every text field.
        if "\x00" in value or not inputs.encodes(value):
            return _DRF
        if pattern is not None and not pattern.search(value):
            return _DRF
        return value

    return check


def _whole(field: serializers.IntegerField) -> Check:
    found = _limits(field, (dj.MaxValueValidator, dj.MinValueValidator))
    high, low = _bound(found, dj.MaxValueValidator), _bound(found, dj.MinValueValidator)

    def check(value: Any) -> Any:
        if type(value) is not int or value not in _INT_RANGE:  # bool is not int here
            return _DRF
        if (high is not None and value > high) or (low is not None and value < low):
            return _DRF
        return value

    return check


def _boolean(field: serializers.BooleanField) -> Check:
    _limits(field, ())
    return lambda value: value if type(value) is bool else _DRF


def _choice(field: serializers.ChoiceField) -> Check:
    _limits(field, ())
    choices = dict(field.choice_strings_to_values)

    def check(value: Any) -> Any:
        if type(value) is not str or not value or value not in choices:
            return _DRF
        return choices[value]

    return check


def _list(field: serializers.ListField) -> Check:
    found = _limits(field, (dj.MaxLengthValidator, dj.MinLengthValidator))
    longest, shortest = _bound(found, dj.MaxLengthValidator), _bound(found, dj.MinLengthValidator)
    child, allow_empty = _field(field.child), field.allow_empty

    def check(value: Any) -> Any:
        if type(value) is not list or (not value and not allow_empty):
            return _DRF
        if (longest is not None and len(value) > longest) or (
                shortest is not None and len(value) < shortest):
            return _DRF
        items = []
        for item in value:
            checked = child(item)
            if checked is _DRF:
                return _DRF
            items.append(checked)
        return items

    return check


# Exact classes only: a subclass may validate differently.
_BUILDERS: dict[type, Callable[[Any], Check]] = {
    StrictCharField: _text, serializers.RegexField: _text, StrictIntegerField: _whole,
    StrictBooleanField: _boolean, serializers.ChoiceField: _choice,
    serializers.ListField: _list,
}


def _field(field: serializers.Field) -> Check:
    if isinstance(field, StrictSerializer):
        core = _serializer(field)
    elif type(field) in _BUILDERS:
        core = _BUILDERS[type(field)](field)
    else:
        raise _Unsupported
    allow_null = field.allow_null

    def check(value: Any) -> Any:
        if value is None:  # DRF: null is the value itself when allowed, unvalidated
            return None if allow_null else _DRF
        return core(value)

    return check


def _plain(cls: type) -> bool:
    """A strict serializer whose validation is exactly StrictSerializer's:
    no validate hook, no override of the steps (validate_<field>: _serializer)."""
    base = serializers.Serializer
    return (issubclass(cls, StrictSerializer)
            and cls.to_internal_value is StrictSerializer.to_internal_value
            and all(getattr(cls, name) is getattr(base, name) for name in (
                "run_validation", "run_validators", "validate", "validate_empty_values",
                "get_value")))


def _serializer(serializer: StrictSerializer) -> Check:
    if not _plain(type(serializer)) or serializer.validators:
        raise _Unsupported
    fields = []
    for name, field in serializer.fields.items():
        if field.read_only:
            continue  # known (not an unknown field), never in the validated data
        if field.source != name or field.source_attrs != [name] or getattr(
                field.default, "requires_context", False) or hasattr(
                type(serializer), f"validate_{name}"):
            raise _Unsupported
        fields.append((name, _field(field), field.required, field.default))
    known = frozenset(serializer.fields)

    def check(data: Any) -> Any:
        if type(data) is not dict or not known.issuperset(data):
            return _DRF
        result = {}
        for name, field_check, required, default in fields:
            if name in data:
                value = field_check(data[name])
                if value is _DRF:
                    return _DRF
                result[name] = value
            elif required:
                return _DRF
            elif default is not empty:
                result[name] = default() if callable(default) else default
        return result

    return check


_compiled: dict[type, Check | None] = {}


def compiled(serializer_class: type) -> Check | None:
    """The class's checks, compiled on first use; None when DRF validates it."""
    try:
        return _compiled[serializer_class]
    except KeyError:
        pass
    try:
        check: Check | None = _serializer(serializer_class())
    except _Unsupported:
        check = None
    _compiled[serializer_class] = check
    return check


def accepted(serializer_class: type, data: Any) -> dict[str, Any] | None:
    """What DRF would validate ``data`` to, when the checks can tell; else None."""
    check = compiled(serializer_class)
    if check is None:
        return None
    value = check(data)
    return None if value is _DRF else value


def validated(serializer_class: type, data: Any) -> dict[str, Any]:
    """``data`` validated by ``serializer_class`` (a ValidationError, answered 400, if not)."""
    value = accepted(serializer_class, data)
    if value is not None:
        return value
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data

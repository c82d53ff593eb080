"""The strict fields every request shape is built from, and ``validated``:
a body validated by its shape, DRF's own validation.

Requests are strict: an unknown field is a 400. These check types and sizes
so each bad field gets its own message; the domain checks the same limits
again (it is the authority for every shell).
"""

from typing import Any

from django.utils.functional import cached_property
from rest_framework import serializers
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from ledger.domain import vocabulary


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know: a typo must not be silently ignored."""

    # (A comment, not the docstring: drf-spectacular publishes docstrings.)
    # A request serializer validating a body (``Serializer(data=...)``, no
    # instance, context or partial) reuses one bound field tree per class
    # instead of DRF's deep copy of every declared field, nested ones
    # included, per instance (about 2/3 of validating a checkpoint). The
    # tree's root is a prototype of the class built the same way (no instance,
    # context or partial), so a field asking its root or parent for those
    # sees what it would have seen. Validation keeps its state in locals and
    # on the serializer instance (``_errors``, ``_validated_data``), never on
    # the fields; the fields' own lazy caches (``validators``, a nested
    # serializer's ``fields``) fill once, with the same values each time.

    @cached_property
    def fields(self) -> Any:
        cls = type(self)
        if (self.instance is not None or self.partial or self._context
                or not hasattr(self, "initial_data") or self.parent is not None):
            return super().fields
        prototype = cls.__dict__.get("_prototype")
        if prototype is None:
            prototype = cls()
            prototype.fields  # noqa: B018 (bound once, here)
            cls._prototype = prototype
        return prototype.fields

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)


class _NoSurrogates(ProhibitSurrogateCharactersValidator):
    # DRF's check walks every character of every text in Python (about 2 %
    # of a checkpoint request). Encoding the text as UTF-8 is one call that
    # fails only on a lone surrogate; only a text that fails is walked, for
    # DRF's own message and code.
    def __call__(self, value: Any) -> None:
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                pass
            else:
                return
        super().__call__(value)


class StrictCharField(serializers.CharField):
    """DRF turns 42 into "42"; an agent that sends a number meant something else."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators = [_NoSurrogates() if type(v) is ProhibitSurrogateCharactersValidator
                           else v for v in self.validators]

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """Only a JSON integer: not "40", not 40.0, not true."""

    default_error_messages = {"invalid": "A whole number is required (a JSON integer)."}

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """Only true or false: not "yes", not 1."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


def text(max_length: int, **kwargs: Any) -> serializers.CharField:
    return StrictCharField(max_length=max_length, trim_whitespace=False, **kwargs)


def whole(**kwargs: Any) -> serializers.IntegerField:
    return StrictIntegerField(**kwargs)


def ranged(name: str, **kwargs: Any) -> serializers.IntegerField:
    """A policy setting's field, bounded by the domain's RANGES (the one
    definition); the operator's caps are the domain's to check (over_cap)."""
    low, high = vocabulary.RANGES[name]
    return whole(min_value=low, max_value=high, **kwargs)


def text_list(**kwargs: Any) -> serializers.ListField:
    return serializers.ListField(child=text(vocabulary.MAX_ITEM), max_length=vocabulary.MAX_ITEMS,
                                 **kwargs)


def validated(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    """``data`` validated by ``serializer_class`` (a ValidationError, answered 400, if not)."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data

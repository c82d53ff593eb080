"""Each event kind is declared once: its payload class, in its family's
domain module, carries its fields, how it folds into the goal's state, its
one-line summary and its style. Nothing outside the class keys a table by a
kind (docs/design.md, "Event kinds")."""

import ast
import importlib
import pkgutil
import types
import typing
from dataclasses import MISSING, fields
from pathlib import Path

import pytest

import ledger.domain
from ledger.domain.codec import Payload, encode, kinds

ROOT = Path(__file__).resolve().parents[2]
REGISTERED = sorted(kinds().items())


def sample(cls: type[Payload]) -> Payload:
    """A payload of ``cls`` with a plain value in every field it requires."""
    values = {}
    for field in fields(cls):
        if field.name in ("lease_expires_at", "unknown"):
            continue
        if field.default is not MISSING:
            continue
        kind = field.type
        if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
            kind = next(a for a in typing.get_args(kind) if a is not type(None))
        kind = typing.get_origin(kind) or kind
        values[field.name] = {str: "sample", int: 2, bool: True, list: [], dict: {}}[kind]
    return cls(**values)


@pytest.mark.parametrize("kind, cls", REGISTERED, ids=[k for k, _ in REGISTERED])
def test_every_kind_declares_its_fold_line_and_style(kind, cls):
    from ledger.domain.events import Style

    assert cls.fold is not Payload.fold, f"{kind} has no fold of its own"
    assert cls.line is not Payload.line, f"{kind} has no summary line of its own"
    assert isinstance(cls.STYLE, Style) and cls.STYLE.look, f"{kind} names no look"
    line = sample(cls).line()
    assert isinstance(line, str) and line.strip() and "\n" not in line


@pytest.mark.parametrize("kind, cls", REGISTERED, ids=[k for k, _ in REGISTERED])
def test_the_summary_of_every_kind_is_its_own_line(kind, cls):
    from ledger.domain.text import clean
    from ledger.operators.summaries import summary

    payload = sample(cls)
    assert summary(kind, encode(payload)) == clean(payload.line())


def test_the_catalogue_lists_every_registered_kind_once():
    from ledger.domain import kinds as catalogue

    assert {p.KIND for p in catalogue.PAYLOADS} == set(kinds())
    assert len(catalogue.PAYLOADS) == len(set(catalogue.PAYLOADS))
    named = {value for name, value in vars(catalogue).items()
             if name.isupper() and isinstance(value, str)}
    assert named == set(kinds())


def kind_names() -> set[str]:
    """What a table keyed by kind would be keyed with: the stored strings, the
    constants the domain names them by, and the payload classes' names."""
    strings = set(kinds())
    names = {cls.__name__ for cls in kinds().values()}
    for info in pkgutil.iter_modules(ledger.domain.__path__):
        module = importlib.import_module(f"ledger.domain.{info.name}")
        names |= {name for name, value in vars(module).items()
                  if name.isupper() and isinstance(value, str) and value in strings}
    return strings | names


def kind_keyed(source: str, names: set[str]) -> list[int]:
    """Lines of dict displays with a key that is a kind (its string, its
    constant, its class; bare or as ``module.NAME``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Dict):
            continue
        for key in node.keys:
            name = (key.value if isinstance(key, ast.Constant) and isinstance(key.value, str)
                    else key.id if isinstance(key, ast.Name)
                    else key.attr if isinstance(key, ast.Attribute) else None)
            if name in names:
                found.append(node.lineno)
                break
    return found


def test_no_table_outside_a_kind_is_keyed_by_kind():
    names = kind_names()
    found = [f"{path.relative_to(ROOT)}:{line}"
             for path in sorted((ROOT / "ledger").rglob("*.py"))
             if "migrations" not in path.parts
             for line in kind_keyed(path.read_text(), names)]
    assert found == [], "declare it on the kind's payload class instead"


def test_the_table_check_sees_strings_constants_and_classes():
    source = ('A = {"goal.paused": 1}\n'
              "B = {events.GOAL_PAUSED: 2}\n"
              "C = {ev.GoalPaused: 3}\n"
              "D = {GOAL_PAUSED: 4}\n"
              'E = {"goal": 5, "paused": 6}\n')
    assert kind_keyed(source, kind_names()) == [1, 2, 3, 4]

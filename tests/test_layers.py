"""The layers' import boundaries (DESIGN section 2), read from the source.

The pure domain imports nothing from Django or from the rest of the project;
``ledger`` (the core: store, application layer, admin, commands) imports
neither the REST shell (``api``) nor the scheduler glue (``scheduling``);
``scheduling`` does not import ``api``; the offline verifier and the agent-side
client import no server code. Every import counts, including the lazy ones
inside functions, because a lazy import is as much a dependency as a
top-level one. Names in strings (INSTALLED_APPS, ``include("api.urls")``, a
django-q2 task's dotted path) are how the project is composed, not imports.
"""

import ast
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SERVER = {"django", "rest_framework", "django_q", "drf_spectacular", "psycopg"}


def imported(source: str, module: str) -> set[str]:
    """Every module ``source`` imports, absolute names (relative ones resolved
    against ``module``, the dotted name of the file)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module.split(".")[: -node.level]
                base = ".".join([*parent, base] if base else parent)
            names.add(base)
            # "from ledger import store" imports ledger.store
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def modules(package: str) -> list[tuple[str, Path]]:
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        if "migrations" in path.parts:
            continue
        dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        found.append((dotted.removesuffix(".__init__"), path))
    return found


def violations(package: str, allowed: Callable[[str], bool],
               refused: Callable[[str], bool]) -> list[str]:
    bad = []
    for module, path in modules(package):
        for name in sorted(imported(path.read_text(), module)):
            if refused(name) and not allowed(name):
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    return bad


def top(name: str) -> str:
    return name.split(".")[0]


def in_package(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


RULES = {
    # The rules: no Django, nothing of the project outside the domain itself.
    "ledger/domain": (lambda n: in_package(n, "ledger.domain"),
                      lambda n: top(n) in SERVER | {"ledger", "api", "scheduling"}),
    # The core and its application layer: shells call it, never the reverse.
    "ledger": (lambda n: False, lambda n: top(n) in {"api", "scheduling"}),
    "scheduling": (lambda n: False, lambda n: top(n) == "api"),
    "wakeledger_verify": (lambda n: False,
                          lambda n: top(n) in SERVER | {"ledger", "api", "scheduling"}),
    # The agent-side client may use the pure domain (the failure classifier,
    # the reset parser), which needs no Django, and nothing else of ours.
    "wakeledger_agent": (lambda n: in_package(n, "ledger.domain"),
                         lambda n: top(n) in SERVER | {"ledger", "api", "scheduling"}),
}


@pytest.mark.parametrize("package", sorted(RULES))
def test_the_layers_import_only_downwards(package):
    if not (ROOT / package).is_dir():
        pytest.skip(f"{package} does not exist")
    allowed, refused = RULES[package]
    assert violations(package, allowed, refused) == []


def test_the_check_sees_lazy_relative_and_from_imports():
    """The checker itself: an import inside a function, a relative import and
    a ``from package import module`` are all seen."""
    source = ("import json\n"
              "from ledger import store\n"
              "from ..api import views\n"
              "def later():\n"
              "    from scheduling.tasks import sweep_leases\n"
              "    import django.db\n")
    names = imported(source, "ledger.domain.example")
    assert {"ledger.store", "ledger.api.views", "scheduling.tasks", "django.db",
            "json"} <= names
    allowed, refused = RULES["ledger/domain"]
    assert [n for n in sorted(names) if refused(n) and not allowed(n)] == [
        "django.db", "ledger", "ledger.api", "ledger.api.views", "ledger.store",
        "scheduling.tasks", "scheduling.tasks.sweep_leases"]


def test_the_domain_is_importable_without_django():
    """Not only by the letter of its imports: the domain really loads with
    Django unavailable (what the agent-side client and the verifier rely on)."""
    import subprocess
    import sys

    blocker = (
        "import importlib.abc, sys\n"
        "class Refuse(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in {'django', 'rest_framework', 'django_q'}:\n"
        "            raise ImportError('the domain imported ' + name)\n"
        "sys.meta_path.insert(0, Refuse())\n"
        "import pkgutil, importlib, ledger.domain\n"
        "for info in pkgutil.iter_modules(ledger.domain.__path__):\n"
        "    importlib.import_module('ledger.domain.' + info.name)\n"
    )
    done = subprocess.run([sys.executable, "-c", blocker], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


# The shells that take a caller's request: each use case is one call into
# ledger.services, so none of them runs a command through the store itself
# (that is where a rule restated in a shell used to hide).
SHELLS = ("api", "ledger/admin.py", "ledger/management", "scheduling/tasks.py")


def store_writes(source: str) -> list[str]:
    """``store.execute(...)`` / ``store.start(...)`` calls in ``source``."""
    return [f"store.{node.func.attr} (line {node.lineno})"
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("execute", "start")
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "store"]


def test_the_shells_run_use_cases_not_store_commands():
    found = []
    for shell in SHELLS:
        path = ROOT / shell
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            found += [f"{file.relative_to(ROOT)}: {call}"
                      for call in store_writes(file.read_text())]
    assert found == []


def test_the_store_write_check_sees_a_call():
    assert store_writes("from ledger import store\nstore.execute(g, c, actor='a')\n") == [
        "store.execute (line 2)"]
    assert store_writes("other.execute(1)\nstore.load(g)\n") == []


def test_tokens_are_derived_in_one_place():
    """HMAC under SECRET_KEY is written once (ledger.services.tokens); the
    webhook signature is the dispatcher's own secret, not a derivation."""
    users = sorted(str(path.relative_to(ROOT)) for package in ("api", "ledger", "scheduling")
                   for path in (ROOT / package).rglob("*.py") if "hmac.new(" in path.read_text())
    assert users == ["ledger/services/tokens.py", "scheduling/signatures.py"]

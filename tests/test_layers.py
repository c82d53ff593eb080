"""The layers' import boundaries (docs/design.md, "Layout (top level is fixed)"),
read from the source.

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
            # "from ledger.eventstore import store" imports ledger.eventstore.store
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
              "from ledger.eventstore import store\n"
              "from ..api import views\n"
              "def later():\n"
              "    from scheduling.tasks import sweep_leases\n"
              "    import django.db\n")
    names = imported(source, "ledger.domain.example")
    assert {"ledger.eventstore.store", "ledger.api.views", "scheduling.tasks", "django.db",
            "json"} <= names
    allowed, refused = RULES["ledger/domain"]
    assert [n for n in sorted(names) if refused(n) and not allowed(n)] == [
        "django.db", "ledger.api", "ledger.api.views", "ledger.eventstore",
        "ledger.eventstore.store", "scheduling.tasks", "scheduling.tasks.sweep_leases"]


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


# The shells: every use case is one call into ledger.services, so none of
# them imports the store, nor a command or a rule of the domain (that is
# where a rule restated in a shell used to hide). Checked on the imports
# (the AST), not on how a call is spelled.
SHELLS = ("api", "scheduling", "ledger/admin", "ledger/management", "ledger/operators/commands",
          "ledger/operators/demo.py", "ledger/operators/doctor.py")

# What a shell may take from the domain: the value types it parses into or
# serializes, and the vocabulary (``ledger.domain.vocabulary``: statuses,
# reasons, limits, row names, the resume prompt's wording; no rule).
SHELL_DOMAIN = {
    ("ledger.domain", "GoalState"),
    ("ledger.domain", "LeaseProof"),
    ("ledger.domain", "Artifact"),
    ("ledger.domain", "DomainError"),
    ("ledger.domain", "Unreadable"),  # a stored event this release cannot read
    ("ledger.domain.commands", "Evidence"),
    ("ledger.domain.commands", "WakeRequest"),
    ("ledger.domain", "vocabulary"),
    # A time of the state as the API shows it (ISO text, "" for none).
    ("ledger.domain", "iso_text"),
}
VOCABULARY = "ledger.domain.vocabulary"

# Named exceptions, each with its reason.
EXCEPTIONS = {
    # The scheduler's names for a goal's rows, re-exported from the domain's
    # one definition (the rows themselves: ledger.services.schedules).
    "scheduling/watchdogs.py": lambda module, name: True,
    # The doctor's read-only judgments of the machinery (no command: its
    # repairs are ``services.sweeps.check``).
    "ledger/operators/doctor.py": lambda module, name: (module, name) in {
        ("ledger.domain", "housekeeping"), ("ledger.domain", "liveness"),
        ("ledger.domain", "clocksteps"),
        ("ledger.domain.events", "iso"), ("ledger.domain.overdue", "ScheduleRow"),
        ("ledger.domain.overdue", "expected_schedules"),
        ("ledger.domain.overdue", "row_problem")},
}


def reached(source: str, module: str) -> list[tuple[str, str, int]]:
    """(module, name, line) for every import of ``ledger.eventstore.store`` or of
    anything in ``ledger.domain``; ``name`` is "*" for a whole module
    (``import ledger.domain.claims``, ``from ledger import domain``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, "*", node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module.split(".")[: -node.level]
                base = ".".join([*parent, base] if base else parent)
            for alias in node.names:
                if (base, alias.name) in {("ledger.eventstore", "store"), ("ledger", "domain")}:
                    found.append((f"{base}.{alias.name}", "*", node.lineno))
                else:
                    found.append((base, alias.name, node.lineno))
    return [(m, n, line) for m, n, line in found
            if in_package(m, "ledger.eventstore.store") or in_package(m, "ledger.domain")]


def shell_violations(path: Path, module: str) -> list[str]:
    excepted = EXCEPTIONS.get(str(path.relative_to(ROOT)), lambda module, name: False)
    bad = []
    for name_module, name, line in reached(path.read_text(), module):
        if in_package(name_module, "ledger.eventstore.store"):
            bad.append(f"{path.relative_to(ROOT)}:{line} imports the store")
        elif (name_module == VOCABULARY and name != "*") or (name_module, name) in SHELL_DOMAIN:
            continue
        elif not excepted(name_module, name):
            bad.append(f"{path.relative_to(ROOT)}:{line} imports {name} from {name_module}")
    return bad


def shell_files() -> list[tuple[str, Path]]:
    files = []
    for shell in SHELLS:
        path = ROOT / shell
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            if "migrations" not in file.parts:
                dotted = ".".join(file.relative_to(ROOT).with_suffix("").parts)
                files.append((dotted.removesuffix(".__init__"), file))
    return files


def test_the_shells_call_use_cases_not_the_store_or_the_rules():
    found = [bad for module, path in shell_files() for bad in shell_violations(path, module)]
    assert found == []


def test_the_shell_check_refuses_what_the_old_views_imported(tmp_path):
    """The check itself, on the imports api/views.py had before it called use cases."""
    old = tmp_path / "views.py"
    old.write_text("from ledger.eventstore import clock, store\n"
                   "from ledger.domain import Artifact, Finish, LeaseProof, liveness\n"
                   "from ledger.domain.commands import Evidence, WakeRequest\n"
                   "from ledger.domain.leases import lease_live\n"
                   "import ledger.domain.claims\n"
                   "def later():\n"
                   "    from ledger.domain.vocabulary import STATUSES\n")
    found = [(m, n) for m, n, _ in reached(old.read_text(), "api.views")]
    assert ("ledger.eventstore.store", "*") in found
    refused = [(m, n) for m, n in found
               if in_package(m, "ledger.eventstore.store")
               or not ((m == VOCABULARY and n != "*") or (m, n) in SHELL_DOMAIN)]
    assert refused == [("ledger.eventstore.store", "*"), ("ledger.domain", "Finish"),
                       ("ledger.domain", "liveness"), ("ledger.domain.leases", "lease_live"),
                       ("ledger.domain.claims", "*")]


def test_no_shell_runs_a_command_through_a_passthrough():
    """``services.goals.execute`` (a command run for any shell) is gone: a use
    case runs its command through ``services.caller.run``, which no shell
    imports."""
    from ledger.services import goals

    assert not hasattr(goals, "execute")
    users = [str(path.relative_to(ROOT)) for _, path in shell_files()
             if "ledger.services.caller import" in path.read_text()
             and "run" in path.read_text().split("ledger.services.caller import")[1].split("\n")[0]]
    assert users == []


def test_tokens_are_derived_in_one_place():
    """HMAC under SECRET_KEY is written once (ledger.access.derivation); the
    webhook signature is the dispatcher's own secret, not a derivation."""
    users = sorted(str(path.relative_to(ROOT)) for package in ("api", "ledger", "scheduling")
                   for path in (ROOT / package).rglob("*.py") if "hmac.new(" in path.read_text())
    assert users == ["ledger/access/derivation.py", "scheduling/signatures.py"]


def simulation_violations(source: str, module: str) -> list[str]:
    """What the simulation may not import: the store, or a command of the
    domain (a class ``decide`` takes, whichever module it is imported from,
    or the commands module whole). Its values and rules it may read: the
    world judges the product by them."""
    import importlib

    from ledger.domain.decider import COMMANDS

    bad = []
    for name_module, name, line in reached(source, module):
        if in_package(name_module, "ledger.eventstore.store"):
            bad.append(f"{module}:{line} imports the store")
        elif name == "*":
            if in_package(name_module, "ledger.domain.commands"):
                bad.append(f"{module}:{line} imports {name_module}")
        elif getattr(importlib.import_module(name_module), name, None) in COMMANDS:
            bad.append(f"{module}:{line} imports the command {name} from {name_module}")
    return bad


def test_the_simulation_calls_use_cases_not_the_store_or_commands():
    """tests/simulation/ drives the product as its shells do: through
    ``ledger.services`` (the seeded ids it needs go in through
    ``ledger.services.ids``), so it tests the use cases the API runs."""
    found = []
    for path in sorted((ROOT / "tests" / "simulation").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        found += simulation_violations(path.read_text(), module)
    assert found == []


def test_the_simulation_check_refuses_what_its_adapter_imported():
    """The check itself, on the imports tests/simulation/product.py had before."""
    old = ("from ledger.domain import AcquireLease, DomainError, GoalState, RunGoal, liveness\n"
           "from ledger.domain.jobs import TrackJob\n"
           "from ledger.domain.commands import LeaseProof\n"
           "from ledger.eventstore import clock, projection, store\n"
           "def later():\n"
           "    import ledger.domain.commands\n")
    assert simulation_violations(old, "tests.simulation.product") == [
        "tests.simulation.product:1 imports the command AcquireLease from ledger.domain",
        "tests.simulation.product:1 imports the command RunGoal from ledger.domain",
        "tests.simulation.product:2 imports the command TrackJob from ledger.domain.jobs",
        "tests.simulation.product:4 imports the store",
        "tests.simulation.product:6 imports ledger.domain.commands"]


def test_no_product_module_is_over_500_lines():
    """Small modules with one job (docs/layout.md); migrations are generated."""
    root = Path(__file__).resolve().parents[1]
    long = sorted(f"{path.relative_to(root)}: {n}"
                  for package in ("ledger", "api", "scheduling", "wakeledger_agent",
                                  "wakeledger_verify")
                  for path in (root / package).rglob("*.py")
                  if "migrations" not in path.parts
                  and (n := len(path.read_text().splitlines())) > 500)
    assert long == [], f"split these modules: {long}"


# ---------------------------------------------------------------- inside ledger

# The layers inside ``ledger``, lowest first: a module imports only from its
# own layer or below. The pure domain; the store and what sits beside it
# (models, the verifiable log, accounts, the notification outbox and channels,
# the project's settings and helpers); the application layer (one function
# per use case); the shells (operator surfaces, admin, commands, the app's
# start-up).
LEDGER_LAYERS = (
    {"domain"},
    {"models", "backends", "eventstore", "log", "access", "notify", "project"},
    {"services"},
    {"operators", "admin", "management", "templatetags", "apps", "__init__"},
)


def ledger_layer(module: str) -> int:
    part = module.split(".")[1] if module.count(".") else "__init__"
    for rank, parts in enumerate(LEDGER_LAYERS):
        if part in parts:
            return rank
    raise AssertionError(f"{module}: in no layer of LEDGER_LAYERS")


def runtime_imports(source: str, module: str) -> set[str]:
    """``imported``, less what is imported for type annotations only
    (``if TYPE_CHECKING:``): that is no dependency at run time."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = [ast.Pass()]
    return imported(ast.unparse(tree), module)


def test_the_layers_inside_ledger_import_only_downwards():
    bad = []
    for module, path in modules("ledger"):
        rank = ledger_layer(module)
        for name in sorted(runtime_imports(path.read_text(), module)):
            if in_package(name, "ledger") and name != "ledger" and ledger_layer(name) > rank:
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert bad == []


def test_no_import_cycle_in_the_store_or_the_application_layer():
    """Module by module (the domain's package re-exports are its own)."""
    found = {m: p for m, p in modules("ledger")
             if in_package(m, "ledger.eventstore") or in_package(m, "ledger.services")
             or in_package(m, "ledger.operators")}
    graph = {m: {n for n in runtime_imports(p.read_text(), m) if n in found and n != m}
             for m, p in found.items()}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                if nxt == goal:
                    return True
                seen.add(nxt)
                todo.append(nxt)
        return False

    assert sorted(f"{m} -> {n}" for m in graph for n in graph[m] if reaches(n, m)) == []


def test_every_use_case_runs_its_commands_through_the_one_entry():
    """``ledger.services.caller.run`` (``start`` for a new goal) owns the
    command's transaction and writes what it causes: no other use case sends
    a command to the store itself."""
    bad = []
    for module, path in modules("ledger/services"):
        if module == "ledger.services.caller":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in {"execute", "record", "start"}
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "store"):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} store.{node.func.attr}")
            if isinstance(node, ast.ImportFrom) and node.module == "ledger.eventstore.store":
                bad += [f"{path.relative_to(ROOT)}:{node.lineno} imports {alias.name}"
                        for alias in node.names if alias.name in {"execute", "record", "start"}]
    assert bad == []


# Django's transaction state on the connection: what ``atomic()`` keeps, and
# no promise to survive a release. Only a database backend's own hooks may
# name the methods, and only to call Django's own (``super()``).
PRIVATE_TRANSACTION_STATE = {
    "atomic_blocks", "run_commit_hooks_on_set_autocommit_on", "commit_on_exit",
    "closed_in_transaction", "savepoint_ids", "_set_autocommit", "_commit", "_rollback",
    "_start_transaction_under_autocommit", "_savepoint", "_savepoint_commit",
    "_savepoint_rollback",
}


def test_no_module_touches_djangos_private_transaction_state():
    bad = []
    for package in ("ledger", "api", "scheduling"):
        for _module, path in modules(package):
            for node in ast.walk(ast.parse(path.read_text())):
                if (isinstance(node, ast.Attribute) and node.attr in PRIVATE_TRANSACTION_STATE
                        and not (isinstance(node.value, ast.Call)
                                 and ast.unparse(node.value) == "super()")):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}")
    assert bad == []

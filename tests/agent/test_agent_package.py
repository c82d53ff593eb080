"""wakeledger_agent is the agent's side: it runs where an agent runs, so it
must import no Django and none of the server's apps, and stay in small pieces."""

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "wakeledger_agent"
SERVER_SIDE = ("django", "rest_framework", "drf_spectacular", "django_q", "api", "scheduling")


def test_the_agent_package_imports_nothing_of_the_server():
    modules = sorted(f"wakeledger_agent.{p.stem}" for p in PACKAGE.glob("*.py")
                     if p.stem not in ("__init__", "__main__"))
    probe = (f"import sys\nfor m in {modules!r}: __import__(m)\n"
             f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {SERVER_SIDE!r}\n"
             "             or (m.startswith('ledger') and not m.startswith('ledger.domain')"
             " and m != 'ledger'))\n"
             "print(','.join(bad))")
    # -I: no user site, no PYTHON* variables: only what the modules import.
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, cwd=PACKAGE.parent, timeout=60)
    assert done.stdout.strip() == "", done.stdout


def test_no_function_of_the_agent_package_is_over_60_lines():
    long = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > 60:
                    long.append(f"{path.name}:{node.name} ({length} lines)")
    assert not long, long

"""The documentation a newcomer reads (issue 24): no path that exists only on
the machine it was written on, links that stay inside the repository and
resolve, and a README short enough to read in five minutes."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

# A clone from a folder of the writer's machine (`git clone /work/…`, `~/…`,
# `file://…`), and an absolute path into a virtualenv (`/work/x/.venv/bin/…`):
# neither exists anywhere else. A deployment's own install directory, which
# docs/deploy.md creates and names, is the one absolute .venv a reader has.
LOCAL_CLONE = re.compile(r"git clone\s+(?:--?\S+\s+)*(?:/|~|file://|\.\./)")
ABSOLUTE_VENV = re.compile(r"(?<![\w.…<>$)}-])/(?:[\w.@+-]+/)*\.venv/")
DEPLOY_DIR = "/srv/wakeledger/.venv/"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _lines(path: Path):
    for number, line in enumerate(path.read_text().splitlines(), 1):
        yield f"{path.relative_to(ROOT)}:{number}", line


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_path_of_a_development_machine(path):
    found = [where for where, line in _lines(path)
             if LOCAL_CLONE.search(line)
             or any(m.group(0) != DEPLOY_DIR and not DEPLOY_DIR.startswith(m.group(0))
                    for m in ABSOLUTE_VENV.finditer(line))]
    assert not found, f"paths that exist only on the writer's machine: {found}"


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve_inside_the_repository(path):
    broken = []
    for where, line in _lines(path):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a URL, or an anchor in the same page
            resolved = (path.parent / target.split("#", 1)[0]).resolve()
            if not resolved.is_relative_to(ROOT) or not resolved.exists():
                broken.append(f"{where}: {target}")
    assert not broken, f"links that leave the repository or lead nowhere: {broken}"
    assert "../shared/" not in path.read_text()


@pytest.mark.parametrize(("line", "bad"), [
    ("$ git clone /work/wt/h11-evidence /tmp/qs && cd /tmp/qs", True),
    ("git clone ~/src/wake-ledger", True),
    ("$ git clone <the repository's URL> wake-ledger", False),
    ("-- /work/wt/h6-mcp/.venv/bin/wakeledger mcp", True),
    ('"command": "/home/me/wl/.venv/bin/wakeledger",', True),
    ('PATH="/tmp/qs/.venv/bin:$PATH"', True),
    ("ExecStart=/srv/wakeledger/.venv/bin/gunicorn", False),
    ('-- "$(pwd)/.venv/bin/wakeledger" mcp', False),
    ("…/wake-ledger/.venv/bin/wakeledger", False),
    (".venv/bin/python manage.py ledger demo", False),
])
def test_the_path_check_catches_what_it_should(line, bad):
    venv = [m.group(0) for m in ABSOLUTE_VENV.finditer(line)
            if m.group(0) != DEPLOY_DIR and not DEPLOY_DIR.startswith(m.group(0))]
    assert bool(LOCAL_CLONE.search(line) or venv) is bad


def test_the_readme_reads_in_five_minutes():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    # What a newcomer needs: the two commands, where the admin is, an agent.
    for needed in ("make run", "make test", "/admin/", "wakeledger start",
                   "wakeledger finish", "docs/quickstart.md"):
        assert needed in readme, needed


def test_the_layout_names_every_module():
    layout = (ROOT / "docs" / "layout.md").read_text()
    packages = ("ledger", "api", "scheduling", "wakeledger_agent")
    missing = [str(path.relative_to(ROOT)) for package in packages
               for path in (ROOT / package).rglob("*.py")
               if "migrations" not in path.parts and path.name != "__init__.py"
               and path.name not in layout]
    assert not missing, f"modules docs/layout.md does not name: {missing}"


# docs/layout.md is the house as built: every product module is named in its
# tree, and every path the tree names exists.
PRODUCT = ("ledger", "api", "scheduling", "wakeledger_agent", "wakeledger_verify")


def layout_tree() -> dict[str, str]:
    """Each path the tree in docs/layout.md names (directories end in "/"),
    with its description. A name's path is its parents' names by indentation;
    a line indented deeper than a child of the line above continues its text."""
    block = (ROOT / "docs" / "layout.md").read_text().split("```")[1]
    named: dict[str, str] = {}
    stack: list[tuple[int, str]] = []  # (indent, directory)
    previous = -2
    for line in block.splitlines()[2:]:  # the fence's tail and the top-level files
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent > previous + 2:
            continue  # a description's continuation
        previous = indent
        parts = re.split(r"\s{2,}", line.strip(), maxsplit=1)
        names, text = parts[0], parts[1] if len(parts) > 1 else ""
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else ""
        for name in (n.strip() for n in names.split(",")):
            named[parent + name] = text
            if name.endswith("/"):
                stack.append((indent, parent + name))
    return named


def test_every_path_docs_layout_names_exists():
    missing = [path for path in layout_tree() if not (ROOT / path).exists()]
    assert missing == []


def test_every_product_module_is_in_docs_layout():
    """Named by its path, or in its directory's description (api/serializers/)."""
    named = layout_tree()
    unnamed = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if "migrations" in relative.parts or path.name == "__init__.py":
                continue
            directory = f"{relative.parent.as_posix()}/"
            if (relative.as_posix() not in named
                    and path.name not in named.get(directory, "")):
                unnamed.append(relative.as_posix())
    assert unnamed == []


# The checks of the whole tree; every other test lives in its layer's folder
# (docs/layout.md "tests/").
TREE_CHECKS = {"test_layers.py", "test_docs.py", "test_settings.py", "test_bench.py"}


def test_tests_live_in_their_layer_folder():
    stray = sorted(p.name for p in (ROOT / "tests").glob("test_*.py")
                   if p.name not in TREE_CHECKS)
    assert stray == [], f"move these into a folder of tests/ (docs/layout.md): {stray}"

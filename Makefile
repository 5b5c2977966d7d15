PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_TEST := $(VENV)/.installed-test
INSPECTOR := .cache/inspector/node_modules/.bin/mcp-inspector
BWRAP := /usr/bin/bwrap
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
CHROMIUM := /usr/bin/chromium

.PHONY: run test lint typecheck unit check clean docs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[examples]"
	touch $@

$(STAMP_TEST): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@ $(STAMP_RUN)

# The executor demo on a fresh temporary ledger, then the MCP gateway with the example config
# (demo tools + the mcp-server-time upstream, ledger ./toolkeeper.db) until Ctrl-C.
run: $(STAMP_RUN)
	$(BIN)/toolkeeper demo
	$(BIN)/toolkeeper serve --config examples/toolkeeper.toml --show-tokens

lint: $(STAMP_TEST)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

typecheck: $(STAMP_TEST)
	$(BIN)/mypy

# The MCP Inspector CLI, a downstream client of the gateway tests (Node 20: 0.15.0 is the newest).
$(INSPECTOR):
	npm install --prefix .cache/inspector --no-audit --no-fund @modelcontextprotocol/inspector@0.15.0

# bubblewrap, the sandbox of sandboxed stdio upstreams and programs (Debian's package).
$(BWRAP):
	$(SUDO) apt-get install -y bubblewrap || ($(SUDO) apt-get update && $(SUDO) apt-get install -y bubblewrap)

# Debian's Chromium, the browser the console's tests drive through Playwright (which downloads
# no browser of its own here).
$(CHROMIUM):
	$(SUDO) apt-get install -y chromium || ($(SUDO) apt-get update && $(SUDO) apt-get install -y chromium)

# The suite on one worker per core (pytest-xdist; `make unit WORKERS=0` runs it in one process):
# its tests keep to their own tmp_path, port 0, PostgreSQL schema and Redis key prefix.
# `worksteal` evens out the long tests (a few take 10 s or more) across the workers.
WORKERS ?= auto
PYTEST := $(BIN)/pytest -n $(WORKERS) --dist worksteal

unit: $(STAMP_TEST) $(INSPECTOR) $(BWRAP) $(CHROMIUM)
	$(PYTEST)

# Lint first (seconds), then the type check beside the tests: they spend much of their time
# waiting on the processes and servers they start, and a cold mypy takes ~50 s of CPU.
test: lint
	$(MAKE) --no-print-directory -j2 typecheck unit

# Lint, types and the fast tests (not `slow`: no gateway, upstream, browser or CLI processes).
check: lint typecheck $(STAMP_TEST) $(INSPECTOR) $(BWRAP) $(CHROMIUM)
	$(PYTEST) -m "not slow"

# The docs site with its API reference from the docstrings, into site/ (no network at build time:
# the theme's assets ship in the mkdocs package; nothing is fetched).
STAMP_DOCS := $(VENV)/.installed-docs

$(STAMP_DOCS): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[docs]"
	touch $@

docs: $(STAMP_DOCS)
	$(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV)

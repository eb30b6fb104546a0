# Every target bootstraps .venv from the project's own files on first use.
# On a machine with its own interpreter and packages (the GPU machine), pass PYTHON=python3 to skip the venv.
.DEFAULT_GOAL := check
SHELL := /bin/bash

ifdef PYTHON
PY := $(PYTHON)
SETUP :=
LABS_SETUP :=
else
PY := .venv/bin/python
SETUP := .venv/.installed
LABS_SETUP := .venv/.core
endif

HAS_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo 1)
# Triton kernels run in the interpreter where no GPU is present.
ifneq ($(HAS_GPU),1)
export TRITON_INTERPRET := 1
endif
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))

.PHONY: labs check lint test fuzz fuzz-campaign bench mutate peers clean redis-server

# The labs need only the exact reference (sympy, mpmath); everything else comes with the first target that needs it.
.venv/.core: pyproject.toml
	python3 -m venv .venv
	.venv/bin/python -m pip install -q -e .
	touch $@

.venv/.installed: .venv/.core constraints/cpu.txt
	.venv/bin/python -m pip install -q --upgrade pip
	.venv/bin/python -m pip install -q -c constraints/cpu.txt -e '.[test,kernels,dev]'
	@$(MAKE) --no-print-directory redis-server
	touch $@

# The shared-database campaign test needs redis-server: installed from the system packages where that is possible.
redis-server:
	@command -v redis-server >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		{ apt-get install -y -q redis-server >/dev/null 2>&1 || \
		{ apt-get update -q >/dev/null 2>&1 && apt-get install -y -q redis-server >/dev/null 2>&1; }; }; } || \
		echo "note: redis-server is missing and could not be installed; tests/test_campaign.py skips its Redis test"

labs: $(LABS_SETUP)
	$(PY) labs/26_compression.py
	$(PY) labs/27_indexing.py

lint: $(SETUP)
	$(PY) -c "from importlinter.cli import lint_imports_command; lint_imports_command()" --no-cache
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

# The suite runs on every core (pytest-xdist); JOBS=1 runs it in one process. A test that runs past
# TEST_TIMEOUT_S seconds fails by name with its stack (pytest-timeout, where installed) instead of hanging the run.
JOBS ?= auto
TEST_TIMEOUT_S ?= 600
test: $(SETUP)
	$(PY) -m pytest -q -n $(JOBS) $$($(PY) -c "import pytest_timeout" 2>/dev/null && echo --timeout=$(TEST_TIMEOUT_S))

check: lint test

fuzz: $(SETUP)
	CSA_PROFILE=deep $(PY) -m pytest -q properties

fuzz-campaign: $(SETUP)
	$(PY) -m csa.campaign $(CAMPAIGN_ARGS)

# Mutation testing of reference/ with mutmut (docs/mutation.md): about 25 minutes on two cores, so not part of check.
# One module: make mutate MUTATE_ARGS="--module topk". The table goes to results/mutation.md.
MUTMUT_VERSION := 3.8.1
mutate: $(SETUP)
	@$(PY) -c "import importlib.metadata as m, sys; sys.exit(m.version('mutmut') != '$(MUTMUT_VERSION)')" 2>/dev/null \
		|| $(PY) -m pip install -q 'mutmut==$(MUTMUT_VERSION)'
	$(PY) scripts/mutate.py --out results/mutation.md $(MUTATE_ARGS)

# The kernels vLLM 0.33.0 and SGLang 0.5.23 ship, judged by csa fuzz through csa/peers/ (docs/peers.md): downloads
# the pinned wheels into .peers/ (pip download --no-deps; needs network once), unpacks them (nothing installed),
# runs every adapter and writes results/peers.md (on a CPU, Triton interpreted). PEERS_ARGS: extra arguments of
# python -m csa.peers.run (e.g. --only sglang, --max-examples 50).
peers: $(SETUP)
	$(PY) -m csa.peers.fetch --carry .peers/carry
	$(PY) -m csa.peers.run --out results/peers.md $(PEERS_ARGS)

bench: $(SETUP)
ifeq ($(HAS_GPU),1)
	$(PY) -m fast.bench --out results
else
	@echo "make bench: no GPU found (nvidia-smi -L failed); benchmarks run only on a CUDA device."
endif

clean:
	rm -rf .venv .hypothesis .mypy_cache .ruff_cache .pytest_cache build *.egg-info repro
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

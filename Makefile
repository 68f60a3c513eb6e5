# Every target installs what it needs first (.venv, see scripts/install.sh).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
ARGS ?=
SWEEP ?=
PYTEST_ARGS ?= --durations=25  # the slowest tests, in every log (and tests/suite_plugin.py's time report)
# Both cores (pytest-xdist): tests that share a module fixture stay on one worker, a test marked
# whole_host runs with no other beside it (tests/suite_plugin.py). TEST_WORKERS=0: one process.
# The slow suite's tests wait much of their time (SLURM's daemons, sleeping jobs, servers, a rank's
# timeout): a third worker runs a test in those waits (the full suite on a clean clone, one hour:
# 1,410 s of pytest on 3 workers, 1,538 s on 2, the same CPU time); the default suite's do not (240 s both).
TEST_WORKERS ?= 2
SLOW_WORKERS ?= 3
PARALLEL = -n $(TEST_WORKERS) --dist loadgroup
SLOW_PARALLEL = -n $(SLOW_WORKERS) --dist loadgroup
UI_PORT ?= 5000
UI_STORE ?= sqlite:///$(CURDIR)/outputs/mlflow.db
UI_ARTIFACTS ?= $(CURDIR)/outputs/mlartifacts

.DEFAULT_GOAL := help
.PHONY: help install run sweep ui browser test test-slow test-all lint format docs docs-check bench mlflow-server slurm-up slurm-down clean

help: ## list the targets (the tool itself: .venv/bin/python -m pipeline.run --help)
	@echo "compile-sweeps: measure torch.compile configurations, one job or a sweep, results in MLflow (README.md)"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml scripts/install.sh
	./scripts/install.sh
	@touch $@

install: $(STAMP) ## create .venv and install the project: torch with its matching torchvision first (scripts/install.sh), then the rest

run: $(STAMP) ## one job with the default config (ARGS=... for overrides; CPU smoke preset without a GPU)
	@if $(PY) -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then \
	  set -x; $(PY) -m pipeline.run $(ARGS); \
	else \
	  echo "make run: no CUDA GPU here, so the CPU smoke preset (experiment=cpu_smoke: vit_tiny, 20 steps) runs instead of ViT-B/16"; \
	  set -x; $(PY) -m pipeline.run experiment=cpu_smoke $(ARGS); \
	fi

sweep: $(STAMP) ## a multirun on SLURM (hydra/launcher=slurm): ARGS=... overrides, SWEEP=<name> a conf/sweep file; log to an MLflow server (MLFLOW_TRACKING_URI); CPU smoke preset on a cluster without GPUs
	@command -v sbatch >/dev/null || { echo "make sweep: no SLURM here (no sbatch on PATH): run the sweep on this machine with \`.venv/bin/python -m pipeline.run -m $(if $(SWEEP),sweep=$(SWEEP) )$(ARGS)\`, or start a test cluster with \`make slurm-up\`" >&2; exit 2; }; \
	preset=; \
	if [ -z "$(findstring experiment=,$(ARGS))" ] && [ "$$($(PY) -m pipeline.sweep.slurm gpus)" = none ]; then \
	  echo "make sweep: the cluster declares no GPUs, so its jobs run the CPU smoke preset (experiment=cpu_smoke: vit_tiny, 20 steps) on CPUs"; \
	  preset=experiment=cpu_smoke; \
	fi; \
	set -x; $(PY) -m pipeline.run -m hydra/launcher=slurm $$preset $(if $(SWEEP),sweep=$(SWEEP)) $(ARGS)

mlflow-server: $(STAMP) ## a real MLflow server on http://127.0.0.1:5000 over outputs/ (ARGS="--background", "--host 0.0.0.0"; stop: scripts/mlflow-server.sh stop)
	./scripts/mlflow-server.sh $(ARGS)

slurm-up: ## a single-node SLURM test cluster from Debian packages (root; no systemd needed)
	./scripts/slurm-up.sh

slurm-down: ## stop the test cluster's daemons
	./scripts/slurm-down.sh

# One worker process, no job runner (GenAI evaluation jobs, trace maintenance: 8 more processes that
# this project does not use), no access log: up in seconds, quiet, and one Ctrl-C stops all of it
# (scripts/ui.sh says why each).
ui: $(STAMP) ## the MLflow UI over the default store (http://127.0.0.1:5000; UI_PORT=..., UI_STORE=...)
	@UI_PORT=$(UI_PORT) UI_STORE=$(UI_STORE) UI_ARTIFACTS=$(UI_ARTIFACTS) VENV=$(VENV) ./scripts/ui.sh

# Without root or sudo Chromium cannot be installed: outside CI the UI tests are then skipped, saying why.
browser: ## headless Chromium for the UI tests (Debian's chromium; does nothing when it is there)
	@./scripts/install-browser.sh || { [ -z "$$CI" ] && echo "make: no Chromium, the UI tests will be skipped"; }

test: $(STAMP) browser ## the default test suite, 4-6 minutes on 2 CPU cores (no GPU; installs Chromium, starts its own MLflow server)
	$(PY) -m pytest -m "not slow" $(PARALLEL) $(PYTEST_ARGS)

test-slow: $(STAMP) ## the slow tests: real inductor compiles, multi-job sweeps, SLURM (about 20 minutes; CI runs both: make test-all, 23-27, 60 on the host's slow hours)
	$(PY) -m pytest -m slow $(SLOW_PARALLEL) $(PYTEST_ARGS)

test-all: $(STAMP) browser ## both, in one pytest session
	$(PY) -m pytest $(SLOW_PARALLEL) $(PYTEST_ARGS)

lint: $(STAMP) ## ruff check and format check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP) ## ruff fix and format
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

docs: $(STAMP) ## regenerate docs/reference.md (every config key from the schema, every metric from the registry)
	$(PY) -m pipeline.config.reference

docs-check: $(STAMP) ## fail if docs/reference.md does not match the schema and the registry
	$(PY) -m pipeline.config.reference --check

bench: $(STAMP) ## the instrument's own benchmarks on a GPU host (refused in one line on a CPU); writes benchmarks/RESULTS.md
	$(PY) benchmarks/bench.py $(ARGS)

clean: ## remove run output (outputs/) and caches, keep .venv
	rm -rf outputs .pytest_cache .ruff_cache

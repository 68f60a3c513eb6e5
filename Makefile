# Every target installs what it needs first (.venv, see scripts/install.sh).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
ARGS ?=
SWEEP ?=
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help install run sweep ui test test-fast lint format docs docs-check bench mlflow-server slurm-up clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml scripts/install.sh
	./scripts/install.sh
	@touch $@

install: $(STAMP) ## create .venv and install the project (CPU torch on machines without a GPU)

run: $(STAMP) ## one job with the default config (ARGS=... for overrides; CPU smoke preset without a GPU)
	@if $(PY) -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then \
	  set -x; $(PY) -m pipeline.run $(ARGS); \
	else \
	  echo "make run: no CUDA GPU here, so the CPU smoke preset (experiment=cpu_smoke: vit_tiny, 20 steps) runs instead of ViT-B/16"; \
	  set -x; $(PY) -m pipeline.run experiment=cpu_smoke $(ARGS); \
	fi

sweep: $(STAMP) ## a multirun on SLURM (hydra/launcher=slurm); ARGS=... overrides, SWEEP=<name> picks conf/sweep/<name>.yaml
	$(PY) -m pipeline.run -m hydra/launcher=slurm $(if $(SWEEP),sweep=$(SWEEP)) $(ARGS)

ui: $(STAMP) ## the MLflow UI over the default store (http://127.0.0.1:5000)
	$(PY) -m mlflow ui --backend-store-uri sqlite:///$(CURDIR)/outputs/mlflow.db --host 127.0.0.1 --port 5000

test: $(STAMP) ## the whole test suite (what CI runs)
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: $(STAMP) ## the suite without the slow tests
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

lint: $(STAMP) ## ruff check and format check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP) ## ruff fix and format
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean: ## remove run output (outputs/) and caches, keep .venv
	rm -rf outputs .pytest_cache .ruff_cache

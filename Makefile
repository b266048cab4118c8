# Two commands matter on a new machine: `make run` and `make test` (see README.md).
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
OPERATOR := $(BIN)/ansible-operator
# The local control plane's state; `make run` and the tests share it.
export ANSIBLE_OPERATOR_CLUSTER_DIR ?= $(CURDIR)/.cluster
PYTEST_ARGS ?=

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

.PHONY: venv
venv: $(VENV)/.installed ## create .venv with the project and its dev tools

.PHONY: binaries
binaries: venv ## build (first time) or reuse the control-plane binaries
	$(OPERATOR) cluster up --build-only

.PHONY: lint
lint: venv ## ruff, ruff format --check, mypy --strict, import layers
	$(BIN)/ruff check runner tests
	$(BIN)/ruff format --check runner tests
	$(BIN)/mypy --strict runner
	$(BIN)/lint-imports

.PHONY: format
format: venv ## apply ruff's fixes and formatting
	$(BIN)/ruff check --fix runner tests
	$(BIN)/ruff format runner tests

.PHONY: test
test: lint binaries ## everything CI runs: lint, unit, integration and e2e tests
	$(BIN)/pytest $(PYTEST_ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; rc=0; fi; exit $$rc

.PHONY: test-unit
test-unit: venv ## only the tests that need no cluster
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

.PHONY: cluster-up
cluster-up: venv ## start the local control plane (builds it the first time)
	$(OPERATOR) cluster up

.PHONY: cluster-down
cluster-down: venv ## stop the local control plane and remove its state
	$(OPERATOR) cluster down

.PHONY: cluster-status
cluster-status: venv ## what the local control plane runs
	$(OPERATOR) cluster status

.PHONY: run
run: venv ## run the memcached sample operator (local cluster unless KUBECONFIG is set)
	@hack/run-sample.sh

.PHONY: clean
clean: ## remove the virtualenv and local state (keeps the binary cache in ~/.cache)
	-$(OPERATOR) cluster down 2>/dev/null
	rm -rf $(VENV) .cluster .pytest_cache .mypy_cache .ruff_cache

.PHONY: bench
bench: venv ## reconcile benchmark on the local cluster (N=50 Memcached CRs)
	$(BIN)/python bench/reconcile.py

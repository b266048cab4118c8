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
# The sample's cluster targets use the cached kubectl (kustomize built in), against
# $KUBECONFIG when set, else the local cluster.
KUBECTL := $(OPERATOR) cluster kubectl
ignore-not-found ?= false
# Images: CONTAINER_TOOL is docker, podman or buildah. BASE_IMAGE is the runtime's base
# (empty: the public python slim image; `local`: made here from Debian packages, for
# machines without a registry). ANSIBLE_CORE is the ansible-core line (2.18 or 2.19).
# REGISTRY, when set, is where images are named and pushed (`local`: the registry of the
# local cluster, started if needed).
RUNTIME_VERSION = $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
RUNTIME_IMG ?= quay.io/ansible-operator-python/ansible-operator:$(RUNTIME_VERSION)
CONTAINER_TOOL ?= docker
BASE_IMAGE ?=
ANSIBLE_CORE ?=
REGISTRY ?=
REGISTRY_ADDRESS = $(if $(filter local,$(REGISTRY)),$(or $(shell $(OPERATOR) cluster registry),$(error REGISTRY=local: no local registry (start the cluster: ansible-operator cluster up --registry))),$(REGISTRY))
IMAGE_BUILD = $(OPERATOR) image build --tool $(CONTAINER_TOOL)
IMAGE_PUSH = $(OPERATOR) image push --tool $(CONTAINER_TOOL)

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# (An egg-info directory left by the former setuptools build would be read as a second,
# stale installation of the package: removed.)
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	rm -rf ansible_operator.egg-info
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

.PHONY: venv
venv: $(VENV)/.installed ## create .venv with the project and its dev tools

# `make install-tool` links .venv's ansible-operator into TOOL_BIN (on PATH in most
# shells); the tool keeps running from this checkout, so changes to it take effect at
# once. Without a checkout: `pipx install` of the wheel `make dist` writes (docs/install.md).
TOOL_BIN ?= $(HOME)/.local/bin

.PHONY: install-tool
install-tool: venv ## put `ansible-operator` on PATH: a link in ~/.local/bin (TOOL_BIN) to .venv
	mkdir -p "$(TOOL_BIN)"
	ln -sfn "$(CURDIR)/$(OPERATOR)" "$(TOOL_BIN)/ansible-operator"
	@echo "installed $(TOOL_BIN)/ansible-operator -> $(CURDIR)/$(OPERATOR)"
	@case ":$$PATH:" in *":$(TOOL_BIN):"*) ;; \
	  *) echo "$(TOOL_BIN) is not on PATH; add it: export PATH=\"$(TOOL_BIN):\$$PATH\"" ;; esac

# The wheel and the sdist, reproducibly: the same bytes for the same tree (hatchling
# orders files and stamps every one with SOURCE_DATE_EPOCH, the last commit's time).
DIST_DIR ?= dist
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)

.PHONY: dist
dist: venv ## build the wheel and sdist into dist/ (python -m build, reproducible)
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(BIN)/python -m build --outdir $(DIST_DIR) .
	@cd $(DIST_DIR) && sha256sum ansible_operator-$(RUNTIME_VERSION)*

.PHONY: binaries
binaries: venv ## build (first time) or reuse the control-plane binaries, operator-sdk, opm, OLM v0 and v1, the Go ansible-operator
	$(OPERATOR) cluster up --build-only

.PHONY: lint
lint: venv ## ruff, ruff format --check, mypy --strict, import layers
	$(BIN)/ruff check runner tests bench
	$(BIN)/ruff format --check runner tests bench
	$(BIN)/mypy --strict runner
	$(BIN)/lint-imports

.PHONY: format
format: venv ## apply ruff's fixes and formatting
	$(BIN)/ruff check --fix runner tests bench
	$(BIN)/ruff format runner tests bench

# Debian packages the tests need, installed where missing: the real node's runtime (runc,
# containerd), CNI plugins, the pause image's init and the tools its network setup calls;
# the image tools (podman, buildah, mmdebstrap, skopeo); the shells completion is tested in
# (and bash-completion, which loads bash's); pipx, which installs the wheel in a test.
NODE_PACKAGES := containerd runc containernetworking-plugins catatonit iptables iproute2
IMAGE_PACKAGES := podman buildah mmdebstrap skopeo
SHELL_PACKAGES := zsh fish bash-completion
TOOL_PACKAGES := pipx
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# apt-get install of the packages of $(1) that dpkg does not list as installed.
define install_missing
	@missing="$$(for p in $(1); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done)"; \
	if [ -n "$$missing" ]; then \
		echo "installing" $$missing; \
		$(SUDO) apt-get install -y -q $$missing \
			|| { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q $$missing; }; \
	fi
endef

.PHONY: node-packages
node-packages: ## install the Debian packages a real node needs (cluster up --real-node), if missing
	$(call install_missing,$(NODE_PACKAGES))

.PHONY: container-tools
container-tools: ## install podman, buildah, mmdebstrap and skopeo where missing (apt)
	$(call install_missing,$(IMAGE_PACKAGES))

.PHONY: test-packages
test-packages: ## every Debian package `make test` needs, where missing
	$(call install_missing,$(NODE_PACKAGES) $(IMAGE_PACKAGES) $(SHELL_PACKAGES) $(TOOL_PACKAGES))

# Each pytest run of `make test` ends with its slowest steps (set-up, call and tear-down
# of a test are timed apart), so that a test or fixture that grows slow shows in CI's log.
DURATIONS ?= --durations=25 --durations-min=1

# Each pytest run of `make test` goes over PYTEST_WORKERS processes (pytest-xdist): tests
# that share something machine- or cluster-wide stay on one worker, every other module is
# a unit of its own (tests/support/parallel.py). 0 runs them in one process.
PYTEST_WORKERS ?= 3
XDIST = $(if $(filter-out 0,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder)

# `make test` installs the `bench` extra too (matplotlib, ansible-runner-http), so that
# the chart drawing of bench/charts.py is tested and the differential suite
# (tests/differential) can run the Go ansible-operator, which reads Ansible's events
# through ansible-runner-http: about a minute once per fresh venv. `binaries` builds that
# Go operator (once, cached).
.PHONY: test
test: lint binaries test-packages venv-core218 bench-compare-deps ## everything CI runs: lint, unit, integration and e2e tests, then the ansible-core 2.18 line's
	$(BIN)/pytest $(XDIST) $(DURATIONS) $(PYTEST_ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; rc=0; fi; \
	$(CORE218_PYTEST) $(CORE218_TESTS) $(XDIST) $(DURATIONS) $(PYTEST_ARGS); rc218=$$?; \
	if [ $$rc -ne 0 ]; then exit $$rc; fi; exit $$rc218

# The second ansible-core line CI tests: the main venv has the newest the ranges allow
# (2.19, ansible 12); this one has 2.18 with ansible 11, the line of operator-sdk's Go
# image. Its tests: the hooks' unit tests and both backends in process, the sample
# operator, the backend-equivalence suite with operators run by its interpreter, the plans
# whose runs the preview hook (2.18: its own spots) skips tasks in, and the differential
# suite (the Go operator and ours on that line).
CORE218_VENV ?= .venv-core218
CORE218_PINS := 'ansible-core>=2.18,<2.19' 'ansible>=11,<12'
CORE218_TESTS ?= tests/unit/ansible tests/integration/test_ansible_backend.py \
	tests/integration/test_fast_backend.py tests/integration/test_memcached_sample.py \
	tests/integration/test_backend_equivalence.py tests/differential \
	tests/integration/test_plan.py::test_tasks_acting_outside_the_api_are_listed_and_not_run \
	tests/integration/test_plan.py::test_a_failing_role_exits_1_and_names_the_task
CORE218_PYTEST = ANSIBLE_OPERATOR_TEST_PYTHON=$(abspath $(CORE218_VENV))/bin/python \
	$(CORE218_VENV)/bin/pytest

# After .venv's install: one pip at a time (two cores; their output stays apart).
$(CORE218_VENV)/.installed: pyproject.toml | $(VENV)/.installed
	$(PYTHON) -m venv $(CORE218_VENV)
	$(CORE218_VENV)/bin/pip install --quiet --upgrade pip
	$(CORE218_VENV)/bin/pip install --quiet -e '.[test,go-operator]' $(CORE218_PINS)
	touch $@

.PHONY: venv-core218
venv-core218: $(CORE218_VENV)/.installed ## create .venv-core218: the project on ansible-core 2.18 (ansible 11)

.PHONY: test-core218
test-core218: venv-core218 binaries ## only the ansible-core 2.18 line's tests (CORE218_TESTS)
	$(CORE218_PYTEST) $(CORE218_TESTS) $(PYTEST_ARGS)

.PHONY: molecule
molecule: venv ## molecule test of molecule/default and molecule/role (local cluster unless KUBECONFIG is set)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/molecule test --all

.PHONY: test-olm
test-olm: venv ## only the OLM end-to-end test (a private cluster with OLM; builds OLM the first time)
	$(BIN)/pytest tests/e2e/test_olm.py $(PYTEST_ARGS)

.PHONY: test-olm-images
test-olm-images: venv ## only OLM v0 and v1 from images (a private cluster with a registry, a real node, both OLMs)
	$(BIN)/pytest tests/e2e/test_olm_images.py $(PYTEST_ARGS)

.PHONY: test-unit
test-unit: venv ## only the tests that need no cluster
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

# The inner loop: unit tests and the two in-process tiers against the real API server:
# the engine with a scripted reconciler, the Ansible operator with a scripted Ansible
# backend; the local cluster is reused or started, or $ANSIBLE_OPERATOR_TEST_KUBECONFIG
# names another.
.PHONY: test-fast
test-fast: venv ## unit tests + the in-process engine and operator tiers (the inner loop)
	$(BIN)/pytest tests/unit tests/integration/engine tests/integration/operator $(DURATIONS) $(PYTEST_ARGS)

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
	rm -rf $(VENV) $(CORE218_VENV) .cluster .pytest_cache .mypy_cache .ruff_cache

# bench/compare's options for its three runs in `make bench`: N CRs at once
# (COMPARE_ARGS, e.g. '--counts 1,20'), one CR at a time (LATENCY_ARGS) and 5,000 CRs
# existing at start-up (SCALE_ARGS; Go gets 40 minutes, about what it needs here).
COMPARE_ARGS ?=
LATENCY_ARGS ?= --latency-count 20
SCALE_ARGS ?= --scale-count 5000 --operators fast,go --timeout 2400

$(VENV)/.bench-installed: pyproject.toml $(VENV)/.installed
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	touch $@

.PHONY: bench
bench: venv bench-compare-deps bench-realroles-deps ## reconcile benchmark (N=50), ours vs the Go ansible-operator, fairness, real-shaped roles (about 160 min)
	$(BIN)/python bench/reconcile.py
	$(BIN)/python -m bench.compare $(COMPARE_ARGS)
	$(BIN)/python -m bench.compare --mode latency $(LATENCY_ARGS)
	$(BIN)/python -m bench.compare --mode scale $(SCALE_ARGS)
	$(BIN)/python bench/fairness.py $(FAIRNESS_ARGS)
	$(MAKE) --no-print-directory bench-realroles
	$(BIN)/python bench/charts.py

# e.g. FAIRNESS_ARGS='--mode burst' or '--count 2000 --operators on,off'
FAIRNESS_ARGS ?=

.PHONY: bench-fairness
bench-fairness: bench-compare-deps ## 10,000 CRs resyncing: new/changed CRs' latency (priorities on, off, Go); a 300-CR burst in 512 MiB (about 60 min)
	$(BIN)/python bench/fairness.py $(FAIRNESS_ARGS)

# e.g. CHARTS_ARGS='--results-dir DIR --output-dir DIR' (default: bench/results, in place)
CHARTS_ARGS ?=

.PHONY: bench-charts
bench-charts: bench-compare-deps ## charts (SVG) of bench/results/compare-*.json, next to them
	$(BIN)/python bench/charts.py $(CHARTS_ARGS)

.PHONY: bench-compare
bench-compare: bench-compare-deps ## only ours vs the Go ansible-operator (bench/compare, COMPARE_ARGS)
	$(BIN)/python -m bench.compare $(COMPARE_ARGS)

.PHONY: bench-compare-deps
bench-compare-deps: $(VENV)/.bench-installed

# The seeded chaos soak (bench/soak.py, docs/soak.md) on a private cluster of its own:
# SOAK_ARGS, e.g. '--seed 7 --sharding' to replay a schedule, or the long soak,
# '--crs 1000 --chaos 1800 --chart bench/results/soak.svg'. Without SOAK_ARGS: 200 CRs,
# two minutes of faults, a random seed (printed).
SOAK_ARGS ?=

.PHONY: soak
soak: venv bench-compare-deps ## the seeded chaos soak: replicas, faults, invariants (SOAK_ARGS; docs/soak.md)
	$(BIN)/python bench/soak.py $(SOAK_ARGS)

# bench/realroles.py: the installer role of bench/realroles/ on Go, ours (runner) and ours
# (fast), once with .venv (ansible-core 2.19) and once with .venv-core218 (2.18), which
# then needs the bench extra too (the Go operator's ansible-runner-http, jmespath).
# e.g. REALROLES_ARGS='--runs 7 --scenarios a,b'
REALROLES_ARGS ?=

$(CORE218_VENV)/.bench-installed: pyproject.toml $(CORE218_VENV)/.installed
	$(CORE218_VENV)/bin/pip install --quiet -e '.[test,bench]' $(CORE218_PINS)
	touch $@

.PHONY: bench-realroles-deps
bench-realroles-deps: $(VENV)/.bench-installed $(CORE218_VENV)/.bench-installed

.PHONY: bench-realroles
bench-realroles: bench-realroles-deps ## real-shaped installer role: Go vs ours (runner, fast), ansible-core 2.19 then 2.18 (about 35 min)
	$(BIN)/python bench/realroles.py $(REALROLES_ARGS)
	$(BIN)/python bench/realroles.py --ansible-core-venv $(CORE218_VENV) $(REALROLES_ARGS)

.PHONY: install
install: venv ## install the sample's CRDs (config/crd) into the cluster
	$(KUBECTL) apply -k config/crd

.PHONY: uninstall
uninstall: venv ## delete the sample's CRDs (and its custom resources) from the cluster
	$(KUBECTL) delete --ignore-not-found=$(ignore-not-found) -k config/crd

.PHONY: deploy
deploy: venv ## deploy the sample operator (config/default) into the cluster
	$(KUBECTL) apply -k config/default

.PHONY: undeploy
undeploy: venv ## delete everything `deploy` created
	$(KUBECTL) delete --ignore-not-found=$(ignore-not-found) -k config/default

.PHONY: runtime-build
runtime-build: venv ## build the runtime image RUNTIME_IMG (Dockerfile; BASE_IMAGE, ANSIBLE_CORE)
	$(IMAGE_BUILD) -f Dockerfile -t $(RUNTIME_IMG) \
	  --build-arg BASE_IMAGE=$(BASE_IMAGE) --build-arg ANSIBLE_CORE=$(ANSIBLE_CORE) .

.PHONY: docker-build
docker-build: runtime-build ## build the sample operator's image IMG (sample.Dockerfile, FROM the runtime)
	$(IMAGE_BUILD) -f sample.Dockerfile -t $(IMG) .

.PHONY: docker-push
docker-push: venv ## push the operator image IMG (to REGISTRY when set)
	$(IMAGE_PUSH) $(IMG)

.PHONY: runtime-push
runtime-push: venv ## push the runtime image RUNTIME_IMG
	$(IMAGE_PUSH) $(RUNTIME_IMG)

# OLM packaging of the sample, with operator-sdk's variable names. VERSION is the
# sample operator's version (the bundle's); IMG is its image, the one the CSV deploys.
VERSION ?= 0.1.0
CHANNELS ?= alpha
DEFAULT_CHANNEL ?=
REPLACES ?=
SKIP_RANGE ?=
IMAGE_TAG_BASE ?= example.com/memcached-operator
ifneq ($(REGISTRY),)
ifeq ($(origin IMAGE_TAG_BASE),file)
IMAGE_TAG_BASE := $(REGISTRY_ADDRESS)/memcached-operator
endif
endif
IMG ?= $(IMAGE_TAG_BASE):v$(VERSION)
BUNDLE_IMG ?= $(IMAGE_TAG_BASE)-bundle:v$(VERSION)
CATALOG_IMG ?= $(IMAGE_TAG_BASE)-catalog:v$(VERSION)
# The catalog image's base, with opm (empty: operator-framework's image; `local`: made here
# from the opm the tests build)
OPM_IMAGE ?=
BUNDLE_GEN_FLAGS ?= --version $(VERSION) --channels $(CHANNELS) --image $(IMG) \
	$(if $(DEFAULT_CHANNEL),--default-channel $(DEFAULT_CHANNEL)) \
	$(if $(REPLACES),--replaces $(REPLACES)) $(if $(SKIP_RANGE),--skip-range '$(SKIP_RANGE)')
# Paths of the real validators, built from Go modules on first use (runner/devtools/gomodules/tools).
OLM_TOOL = $$($(OPERATOR) cluster tools | sed -n 's/^$(1): //p')

.PHONY: bundle
bundle: venv ## write bundle/ and bundle.Dockerfile for VERSION (CHANNELS, DEFAULT_CHANNEL, IMG)
	$(OPERATOR) bundle generate $(BUNDLE_GEN_FLAGS)
	$(OPERATOR) bundle validate bundle

.PHONY: bundle-validate
bundle-validate: venv ## check bundle/ with our validator and the real operator-sdk
	$(OPERATOR) bundle validate bundle
	$(call OLM_TOOL,operator-sdk) bundle validate ./bundle

.PHONY: bundle-build
bundle-build: venv ## build the bundle image BUNDLE_IMG (bundle.Dockerfile)
	$(IMAGE_BUILD) -f bundle.Dockerfile -t $(BUNDLE_IMG) .

.PHONY: bundle-push
bundle-push: venv ## push the bundle image BUNDLE_IMG
	$(IMAGE_PUSH) $(BUNDLE_IMG)

.PHONY: catalog
catalog: venv ## add bundle/ (as BUNDLE_IMG) to the file-based catalog in catalog/, check it with opm
	$(OPERATOR) catalog generate --bundle bundle --output catalog --bundle-image $(BUNDLE_IMG) \
	  $(if $(wildcard catalog/*/index.yaml),--from catalog)
	$(call OLM_TOOL,opm) validate catalog

.PHONY: catalog-build
catalog-build: venv ## build the catalog image CATALOG_IMG (catalog.Dockerfile; OPM_IMAGE)
	$(IMAGE_BUILD) -f catalog.Dockerfile -t $(CATALOG_IMG) --build-arg OPM_IMAGE=$(OPM_IMAGE) .

.PHONY: catalog-push
catalog-push: venv ## push the catalog image CATALOG_IMG
	$(IMAGE_PUSH) $(CATALOG_IMG)

"""Top-level files of a new project: Makefile, Dockerfile, requirements.yml, watches.yaml.

Pure: each function returns file text for the names it is given. The Makefile keeps the
target names operator-sdk users type (`run`, `install`, `deploy`, `bundle`, ...); its
cluster targets go through `ansible-operator cluster kubectl` (kustomize built in), so no
separate kubectl is needed; only `deploy` edits a kustomization (`kustomize edit set
image`), with the kustomize on PATH or one `go install`ed into bin/, as operator-sdk's
Makefile fetches its own. The Dockerfile builds FROM our runtime image at this version.
"""

from __future__ import annotations

from runner import __version__

__all__ = [
    "RUNTIME_IMAGE",
    "RUNTIME_UID",
    "dockerfile",
    "dockerignore",
    "gitignore",
    "makefile",
    "requirements",
    "watches",
]

# The runtime image (the top-level Dockerfile of this repository builds it) and its user.
RUNTIME_IMAGE = "quay.io/ansible-operator-python/ansible-operator"
RUNTIME_UID = 1001

_DOCKERFILE = """\
# Image of the @PROJECT@ project: the ansible-operator runtime plus this project's
# watches.yaml, roles and playbooks in $HOME (/opt/ansible, the working directory).
# Build with `docker build -t IMG .` or `podman build -t IMG .` (`make docker-build`).
FROM @IMAGE@:@VERSION@

COPY --chown=@UID@:0 requirements.yml ${HOME}/requirements.yml
RUN ansible-galaxy collection install -r ${HOME}/requirements.yml \\
 && chmod -R ug+rwx ${HOME}/.ansible

COPY --chown=@UID@:0 watches.yaml ${HOME}/watches.yaml
COPY --chown=@UID@:0 roles/ ${HOME}/roles/
COPY --chown=@UID@:0 playbooks/ ${HOME}/playbooks/
"""

_MAKEFILE = """\
# Build, run, deploy and package the @PROJECT@ project. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# The operator's version: tag of its image and version of its OLM bundle.
VERSION ?= 0.0.1
# Bundle channels (comma-separated) and the default channel.
CHANNELS ?= alpha
DEFAULT_CHANNEL ?= alpha
# Images: IMG runs the operator; the bundle and catalog images carry its OLM metadata.
IMAGE_TAG_BASE ?= @DOMAIN@/@PROJECT@
IMG ?= $(IMAGE_TAG_BASE):$(VERSION)
BUNDLE_IMG ?= $(IMAGE_TAG_BASE)-bundle:v$(VERSION)
CATALOG_IMG ?= $(IMAGE_TAG_BASE)-catalog:v$(VERSION)
# docker or podman
CONTAINER_TOOL ?= docker

# The ansible-operator command: from PATH, else bin/ansible-operator, a virtualenv that
# `make ansible-operator` (a prerequisite of every target that needs the command) makes
# with pip: the checkout ANSIBLE_OPERATOR_SOURCE (editable) when set, else what
# ANSIBLE_OPERATOR_PIP names (pip's arguments: the wheel `init` was installed from, or
# its version from the package index pip is configured with).
# `ansible-operator cluster kubectl` is a kubectl (with kustomize built in) that talks to
# $KUBECONFIG when set, else to the local cluster.
ANSIBLE_OPERATOR_SOURCE ?= @SOURCE@
ANSIBLE_OPERATOR_PIP ?= @PIP@
LOCALBIN ?= $(CURDIR)/bin
PYTHON ?= python3
ON_PATH := $(shell command -v ansible-operator 2>/dev/null)
ANSIBLE_OPERATOR ?= $(or $(ON_PATH),$(LOCALBIN)/ansible-operator)
KUBECTL ?= $(ANSIBLE_OPERATOR) cluster kubectl
# `make run` serves metrics and health probes on loopback only; e.g. RUN_ARGS=--zap-devel
RUN_ARGS ?= --metrics-bind-address=127.0.0.1:8443 --health-probe-bind-address=127.0.0.1:6789
# `make plan CR=config/samples/<file>.yaml` (or CR=<kind>/<name> of a CR in the cluster):
# what a reconcile of it would change, changing nothing; e.g. PLAN_ARGS="--set spec.size=3".
CR ?=
PLAN_ARGS ?=
ignore-not-found ?= false
# kustomize (only `deploy` needs it, to set the image): from PATH, else bin/kustomize,
# built by `make kustomize` with `go install` (Go and its module proxy needed once).
KUSTOMIZE_VERSION ?= v5.8.1
KUSTOMIZE ?= $(or $(shell command -v kustomize 2>/dev/null),$(LOCALBIN)/kustomize)
# operator-sdk and opm, for their own checks (`operator-sdk bundle validate`, `opm
# validate`): from PATH, else built once from Go modules by `ansible-operator cluster tools`.
SDK_ON_PATH := $(shell command -v operator-sdk 2>/dev/null)
OPM_ON_PATH := $(shell command -v opm 2>/dev/null)
OPERATOR_SDK ?= $(or $(SDK_ON_PATH),$(call TOOL_PATH,operator-sdk))
OPM ?= $(or $(OPM_ON_PATH),$(call TOOL_PATH,opm))
TOOL_PATH = $$($(ANSIBLE_OPERATOR) cluster tools | sed -n 's/^$(1): //p')
# Platforms of `make docker-buildx`.
PLATFORMS ?= linux/arm64,linux/amd64,linux/s390x,linux/ppc64le
HELP_LINE = {printf "  %-16s %s\\n", $$1, $$2}
BUILD_IMG = $(CONTAINER_TOOL) build -t $(IMG) .
TOOL_EDITABLE = --editable "$(ANSIBLE_OPERATOR_SOURCE)"
TOOL_PIP_ARGS = $(if $(ANSIBLE_OPERATOR_SOURCE),$(TOOL_EDITABLE),$(ANSIBLE_OPERATOR_PIP))

.PHONY: all
all: docker-build ## build the operator image (docker-build)

.PHONY: help
help: ## list the targets
\t@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '$(HELP_LINE)'

.PHONY: ansible-operator
ansible-operator: ## find ansible-operator: on PATH, else in bin/ (installed there once)
\t@command -v $(firstword $(ANSIBLE_OPERATOR)) >/dev/null || \\
\t  $(MAKE) --no-print-directory $(LOCALBIN)/ansible-operator

$(LOCALBIN)/ansible-operator:
\t@if [ -n "$(ANSIBLE_OPERATOR_SOURCE)" ] && \\
\t  [ ! -f "$(ANSIBLE_OPERATOR_SOURCE)/pyproject.toml" ]; then \\
\t  echo "ansible-operator is not on PATH, and ANSIBLE_OPERATOR_SOURCE" \\
\t    "('$(ANSIBLE_OPERATOR_SOURCE)') is no checkout of it. Put it on PATH (in a checkout:" \\
\t    "make install-tool), or install it into bin/ with:" \\
\t    "make ansible-operator ANSIBLE_OPERATOR_SOURCE=/path/to/checkout" >&2; \\
\t  exit 1; fi
\t@if [ -z "$(ANSIBLE_OPERATOR_SOURCE)$(strip $(ANSIBLE_OPERATOR_PIP))" ]; then \\
\t  echo "ansible-operator is not on PATH, and neither ANSIBLE_OPERATOR_SOURCE (a checkout)" \\
\t    "nor ANSIBLE_OPERATOR_PIP (pip's arguments) says where to install it from. Put it on" \\
\t    "PATH (pipx install ansible_operator-VERSION-py3-none-any.whl), or install it into bin/" \\
\t    "with: make ansible-operator ANSIBLE_OPERATOR_PIP=/path/to/the.whl" >&2; \\
\t  exit 1; fi
\t@echo "ansible-operator is not on PATH: installing $(TOOL_PIP_ARGS) into bin/venv"
\t$(PYTHON) -m venv $(LOCALBIN)/venv
\t$(LOCALBIN)/venv/bin/pip install --quiet $(TOOL_PIP_ARGS)
\tln -sf venv/bin/ansible-operator $@

.PHONY: run
run: ansible-operator ## run the operator here, against $KUBECONFIG or else the local cluster
\tANSIBLE_ROLES_PATH="$(CURDIR)/roles" \\
\tKUBECONFIG="$${KUBECONFIG:-$$($(ANSIBLE_OPERATOR) cluster kubeconfig)}" \\
\t$(ANSIBLE_OPERATOR) run --watches-file ./watches.yaml $(RUN_ARGS)

.PHONY: plan
plan: ansible-operator ## show what a reconcile of CR (a file, or kind/name) would change
\t@if [ -z "$(CR)" ]; then echo "usage: make plan CR=config/samples/<file>.yaml" \\
\t  "(or CR=<kind>/<name> of a CR in the cluster) [PLAN_ARGS=...]" >&2; exit 1; fi
\t@if [ -f "$(CR)" ]; then set -- "$(CR)"; else set -- --cr "$(CR)"; fi; \\
\tANSIBLE_ROLES_PATH="$(CURDIR)/roles" \\
\tKUBECONFIG="$${KUBECONFIG:-$$($(ANSIBLE_OPERATOR) cluster kubeconfig)}" \\
\t$(ANSIBLE_OPERATOR) plan --watches-file ./watches.yaml "$$@" $(PLAN_ARGS); \\
\trc=$$?; if [ $$rc -eq 2 ]; then rc=0; fi; exit $$rc  # 2 is "changes", not a failure

.PHONY: cluster-up
cluster-up: ansible-operator ## start the local control plane, unless KUBECONFIG is set
\t@if [ -n "$$KUBECONFIG" ]; then echo "KUBECONFIG is set: using that cluster ($$KUBECONFIG)"; \\
\telse $(ANSIBLE_OPERATOR) cluster up; fi

.PHONY: cluster-down
cluster-down: ansible-operator ## stop the local control plane
\t$(ANSIBLE_OPERATOR) cluster down

.PHONY: install
install: ansible-operator ## install the CRDs (config/crd) into the cluster
\t$(KUBECTL) apply -k config/crd

.PHONY: uninstall
uninstall: ansible-operator ## delete the CRDs (and so every custom resource) from the cluster
\t$(KUBECTL) delete --ignore-not-found=$(ignore-not-found) -k config/crd

.PHONY: deploy
deploy: ansible-operator kustomize ## deploy the operator (config/default), image IMG
\tcd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
\t$(KUBECTL) apply -k config/default

.PHONY: undeploy
undeploy: ansible-operator ## delete everything `deploy` created
\t$(KUBECTL) delete --ignore-not-found=$(ignore-not-found) -k config/default

.PHONY: docker-build
docker-build: ## build the operator image IMG
\t@if $(CONTAINER_TOOL) info >/dev/null 2>&1; then $(BUILD_IMG) ; \\
\telse echo "no working $(CONTAINER_TOOL) here; where there is one, run: $(BUILD_IMG)" ; fi

.PHONY: docker-push
docker-push: ## push the operator image IMG
\t$(CONTAINER_TOOL) push $(IMG)

.PHONY: docker-buildx
docker-buildx: ## build and push IMG for PLATFORMS (needs docker buildx)
\t$(CONTAINER_TOOL) buildx build --push --platform=$(PLATFORMS) --tag $(IMG) .

.PHONY: kustomize
kustomize: ## find kustomize: on PATH, else in bin/ (go install, once)
\t@command -v $(KUSTOMIZE) >/dev/null || $(MAKE) --no-print-directory $(LOCALBIN)/kustomize

$(LOCALBIN)/kustomize:
\t@command -v go >/dev/null || { echo "kustomize is not on PATH and there is no Go to" \\
\t  "build it: install kustomize $(KUSTOMIZE_VERSION), or Go" >&2; exit 1; }
\tGOBIN=$(LOCALBIN) go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)

.PHONY: operator-sdk
operator-sdk: ansible-operator ## print operator-sdk's path (built from Go modules if needed)
\t@echo $(OPERATOR_SDK)

.PHONY: opm
opm: ansible-operator ## print opm's path (built once from Go modules if not on PATH)
\t@echo $(OPM)

.PHONY: bundle
bundle: ansible-operator ## generate bundle/ (CSV, CRDs, metadata) for VERSION and validate it
\t$(ANSIBLE_OPERATOR) bundle generate --version $(VERSION) --channels $(CHANNELS) \\
\t  --default-channel $(DEFAULT_CHANNEL) --image $(IMG) --output-dir bundle
\t$(ANSIBLE_OPERATOR) bundle validate bundle

.PHONY: bundle-build
bundle-build: ## build the bundle image BUNDLE_IMG from bundle.Dockerfile
\t$(CONTAINER_TOOL) build -f bundle.Dockerfile -t $(BUNDLE_IMG) .

.PHONY: bundle-push
bundle-push: ## push the bundle image BUNDLE_IMG
\t$(CONTAINER_TOOL) push $(BUNDLE_IMG)

.PHONY: catalog
catalog: ansible-operator ## add bundle/ to the file-based catalog in catalog/
\t$(ANSIBLE_OPERATOR) catalog generate --package @PROJECT@ --bundle bundle \\
\t  --bundle-image $(BUNDLE_IMG) --channel $(DEFAULT_CHANNEL) \\
\t  --output catalog $(if $(wildcard catalog),--from catalog)

.PHONY: catalog-build
catalog-build: ## build the catalog image CATALOG_IMG from catalog.Dockerfile
\t$(CONTAINER_TOOL) build -f catalog.Dockerfile -t $(CATALOG_IMG) .

.PHONY: catalog-push
catalog-push: ## push the catalog image CATALOG_IMG
\t$(CONTAINER_TOOL) push $(CATALOG_IMG)
"""

_REQUIREMENTS = """\
---
# Ansible collections the roles need beyond what the runtime image ships.
# Already in the runtime image: operator_sdk.util (0.5.0 API, bundled with
# ansible-operator), kubernetes.core and community.docker (docs/images.md); listing them
# here is fine, nothing is fetched for them. The image build installs the rest with
# `ansible-galaxy collection install -r` (which needs Ansible Galaxy), and the operator
# warns at start-up about any that is missing or at another major version:
#   - name: community.general
#     version: "10.0.0"
collections: []
"""

_WATCHES = """\
---
# Each entry maps a custom resource kind to the role or playbook that reconciles it.
# `ansible-operator create api` adds entries (group, version, kind, role or playbook);
# optional keys include vars, reconcilePeriod, finalizer, manageStatus and selector.
[]
"""

_GITIGNORE = """\
# Local state of `ansible-operator cluster` and of the tools
.cluster/
bin/
__pycache__/
*.pyc
*.retry
.molecule/
"""

_DOCKERIGNORE = """\
# Only requirements.yml, watches.yaml, roles/ and playbooks/ go into the image.
*
!requirements.yml
!watches.yaml
!roles/
!playbooks/
"""


def _fill(template: str, **values: str) -> str:
    for key, value in values.items():
        template = template.replace(f"@{key}@", value)
    return template


def dockerfile(project_name: str) -> str:
    return _fill(
        _DOCKERFILE,
        PROJECT=project_name,
        IMAGE=RUNTIME_IMAGE,
        VERSION=__version__,
        UID=str(RUNTIME_UID),
    )


def makefile(*, project_name: str, domain: str, tool_source: str = "", tool_pip: str = "") -> str:
    """`tool_source`: the ansible-operator checkout the Makefile installs into bin/ when
    the command is not on PATH; `tool_pip`: else pip's arguments that install it (a
    wheel, `ansible-operator==VERSION`); both empty: none known, the Makefile then says
    what to do."""
    return _fill(_MAKEFILE, PROJECT=project_name, DOMAIN=domain, SOURCE=tool_source, PIP=tool_pip)


def requirements() -> str:
    return _REQUIREMENTS


def watches() -> str:
    return _WATCHES


def gitignore() -> str:
    return _GITIGNORE


def dockerignore() -> str:
    return _DOCKERIGNORE

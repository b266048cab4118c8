# The ansible-operator runtime image. Operator projects build FROM it (see the Dockerfile
# `ansible-operator init` writes, or sample.Dockerfile) and add watches.yaml, roles/,
# playbooks/ and requirements.yml under $HOME, which is also the working directory.
#
#   make docker-build                        (docker; CONTAINER_TOOL=podman or buildah)
#   docker build -t quay.io/ansible-operator-python/ansible-operator:0.1.0 .
#
# Build arguments:
#   BASE_IMAGE    a Debian bookworm image with Python 3.11 and pip on PATH: the public
#                 python slim image, or one built from Debian packages without a
#                 registry (`make docker-build BASE_IMAGE=local`, see docs/images.md)
#   ANSIBLE_CORE  the ansible-core line: 2.18 (the default, as operator-sdk's image) or
#                 2.19; the collections come from the `ansible` release of that line
#                 (image/select_collections.py)
# pip inside the build uses the host's pip configuration and CA bundle when they are
# passed as the build secrets `pip.conf` and `pip-ca` (`make docker-build` passes them).
#
# Read-only root file system: at run time everything is written under /tmp (Ansible's
# temp dirs, the ansible-runner artifacts), so mount an emptyDir there, as
# config/manager/manager.yaml does. $HOME holds the project and may stay read-only.
ARG BASE_IMAGE=docker.io/library/python:3.11.14-slim-bookworm
ARG ANSIBLE_CORE=2.18

# Only the collections the image ships, out of the `ansible` distribution (~760 MB).
FROM ${BASE_IMAGE} AS collections
ARG ANSIBLE_CORE
COPY image/ /tmp/image/
RUN --mount=type=secret,id=pip.conf --mount=type=secret,id=pip-ca \
    . /tmp/image/pip-env.sh \
 && python3 /tmp/image/select_collections.py "${ANSIBLE_CORE}" /collections

FROM ${BASE_IMAGE}
ARG ANSIBLE_CORE

LABEL org.opencontainers.image.title="ansible-operator" \
      org.opencontainers.image.description="Kubernetes operators written as Ansible roles and playbooks" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV HOME=/opt/ansible \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    ANSIBLE_ROLES_PATH=/opt/ansible/roles \
    ANSIBLE_LOCAL_TEMP=/tmp/ansible/tmp \
    ANSIBLE_REMOTE_TEMP=/tmp/ansible/tmp \
    ANSIBLE_OPERATOR_RUNNER_DIR=/tmp/ansible-operator/runner

# tini is PID 1: it forwards SIGTERM to the operator and reaps processes orphaned when a
# run is killed (the operator itself reaps only its own children). Bases built from
# Debian packages have it already. Its upstream version is checked, not Debian's revision
# (0.19.0-1 became 0.19.0-1+b3 in a rebuild).
RUN if ! command -v tini >/dev/null; then \
      apt-get update \
      && apt-get install -y --no-install-recommends tini \
      && rm -rf /var/lib/apt/lists/* ; \
    fi \
 && test "$(dpkg-query -W -f '${source:Upstream-Version}' tini)" = 0.19.0

# The dependencies (ansible-core, ansible-runner, the Kubernetes clients) in a layer of
# their own, rebuilt only when pyproject.toml or the ansible-core line changes. Left out
# of it: ansible-test (a developer's tool) and the kubernetes package's own asyncio
# client `kubernetes.aio` (68 MB; the operator uses kubernetes-asyncio, the modules the
# synchronous client).
COPY pyproject.toml /tmp/src/
COPY image/ /tmp/image/
RUN --mount=type=secret,id=pip.conf --mount=type=secret,id=pip-ca \
    . /tmp/image/pip-env.sh \
 && python3 /tmp/image/requirements.py /tmp/src/pyproject.toml "${ANSIBLE_CORE}" > /tmp/requirements.txt \
 && pip install --no-cache-dir -r /tmp/requirements.txt \
 && site="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
 && rm -rf "${site}/ansible_test" "${site}/kubernetes/aio" /tmp/src /tmp/requirements.txt

# System-wide collections: found by Ansible and by `ansible-galaxy collection install -r
# requirements.yml` in a project's image, which then has nothing to fetch for them.
COPY --from=collections /collections/ /usr/share/ansible/collections/

# The package itself (its dependencies are above) with the bundled operator_sdk.util,
# which is also linked among the system-wide collections.
COPY pyproject.toml README.md /tmp/src/
COPY runner/ /tmp/src/runner/
RUN --mount=type=secret,id=pip.conf --mount=type=secret,id=pip-ca \
    . /tmp/image/pip-env.sh \
 && pip install --no-cache-dir --no-deps /tmp/src \
 && rm -rf /tmp/src /tmp/image \
 && bundled="$(python3 -c 'from runner.ansible.bundledcollection import bundled_collections_path as p; print(p())')" \
 && mkdir -p /usr/share/ansible/collections/ansible_collections/operator_sdk \
 && ln -s "${bundled}/ansible_collections/operator_sdk/util" \
      /usr/share/ansible/collections/ansible_collections/operator_sdk/util \
 && mkdir -p /opt/ansible/roles /opt/ansible/playbooks /opt/ansible/.ansible \
 && chown -R 1001:0 /opt/ansible \
 && chmod -R g=u /opt/ansible

WORKDIR /opt/ansible
USER 1001

ENTRYPOINT ["/usr/bin/tini", "--", "ansible-operator", "run", "--watches-file=./watches.yaml"]

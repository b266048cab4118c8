# The ansible-operator runtime image. Operator projects build FROM it (see the Dockerfile
# `ansible-operator init` writes, or sample.Dockerfile) and add watches.yaml, roles/,
# playbooks/ and requirements.yml under $HOME, which is also the working directory.
#
#   docker build -t quay.io/ansible-operator-python/ansible-operator:0.1.0 .
#   podman build -t quay.io/ansible-operator-python/ansible-operator:0.1.0 .
#
# Read-only root file system: at run time everything is written under /tmp (Ansible's
# temp dirs, the ansible-runner artifacts), so mount an emptyDir there, as
# config/manager/manager.yaml does. $HOME holds the project and may stay read-only.
FROM python:3.11.14-slim-bookworm

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

# The package with its dependencies (ansible, with kubernetes.core) and the bundled
# operator_sdk.util collection; the sources are removed again.
COPY pyproject.toml README.md /tmp/src/
COPY runner/ /tmp/src/runner/
# tini is PID 1: it forwards SIGTERM to the operator and reaps processes orphaned when a
# run is killed (the operator itself reaps only its own children).
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini=0.19.0-1 \
 && rm -rf /var/lib/apt/lists/* \
 && pip install --no-cache-dir /tmp/src \
 && rm -rf /tmp/src \
 && mkdir -p /opt/ansible/roles /opt/ansible/playbooks /opt/ansible/.ansible \
 && chown -R 1001:0 /opt/ansible \
 && chmod -R g=u /opt/ansible

WORKDIR /opt/ansible
USER 1001

ENTRYPOINT ["/usr/bin/tini", "--", "ansible-operator", "run", "--watches-file=./watches.yaml"]

# Image of the memcached-operator project: the ansible-operator runtime plus this project's
# watches.yaml, roles and playbooks in $HOME (/opt/ansible, the working directory).
# Build with `docker build -t IMG .` or `podman build -t IMG .` (`make docker-build`).
FROM quay.io/ansible-operator-python/ansible-operator:0.1.0

COPY --chown=1001:0 requirements.yml ${HOME}/requirements.yml
RUN ansible-galaxy collection install -r ${HOME}/requirements.yml \
 && chmod -R ug+rwx ${HOME}/.ansible

COPY --chown=1001:0 watches.yaml ${HOME}/watches.yaml
COPY --chown=1001:0 roles/ ${HOME}/roles/
COPY --chown=1001:0 playbooks/ ${HOME}/playbooks/

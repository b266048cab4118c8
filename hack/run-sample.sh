#!/usr/bin/env bash
# `make run`: the memcached sample operator in the foreground, against $KUBECONFIG when
# set, otherwise against the local control plane (started, and built the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
operator=.venv/bin/ansible-operator

if [ -z "${KUBECONFIG:-}" ]; then
  "$operator" cluster up
  KUBECONFIG="$("$operator" cluster kubeconfig)"
  export KUBECONFIG
fi
echo "using KUBECONFIG=$KUBECONFIG"
"$operator" cluster kubectl apply -k config/crd
"$operator" cluster kubectl wait --for=condition=Established --timeout=60s \
  crd/memcacheds.cache.example.com >/dev/null

cat <<MSG

The operator runs in the foreground (Ctrl-C stops it). In another shell:
  export KUBECONFIG=$KUBECONFIG
  .venv/bin/ansible-operator cluster kubectl apply -f config/samples/cache_v1alpha1_memcached.yaml
  .venv/bin/ansible-operator cluster kubectl get memcached,deployment,pods

MSG
export ANSIBLE_OPERATOR_RELOAD="${ANSIBLE_OPERATOR_RELOAD:-1}"
exec "$operator" run --watches-file ./watches.yaml --zap-encoder console \
  --proxy-port 0 --metrics-bind-address 127.0.0.1:8443 --health-probe-bind-address 127.0.0.1:6789 "$@"

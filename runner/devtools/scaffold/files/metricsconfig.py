"""The metrics side of config/ that `init` writes, laid out as operator-sdk lays it out.

`make deploy` serves the operator's metrics over HTTPS on port 8443, only to callers the
API server authorises (`--metrics-secure --metrics-require-rbac`, patched into the
manager by config/default), behind a Service. The metrics RBAC lets the operator check
tokens and lets a scraper read /metrics; config/prometheus (a ServiceMonitor) and
config/network-policy are opt-in, enabled by uncommenting them in config/default.
config/testing is the overlay the Molecule `default` scenario deploys.
"""

from __future__ import annotations

from typing import Any

from runner.devtools.scaffold.manifest import (
    RBAC_API,
    selector,
    service_account_subject,
    system_object,
)
from runner.devtools.scaffold.yamltext import dump

__all__ = ["METRICS_PORT", "metrics_files", "metrics_rbac_files", "testing_files"]

METRICS_PORT = 8443
PULL_POLICIES = ("Always", "IfNotPresent", "Never")


def metrics_files(project: str) -> dict[str, str]:
    """config/default's metrics Service and patch, config/prometheus, config/network-policy."""
    return {
        "config/default/metrics_service.yaml": _metrics_service(project),
        "config/default/manager_metrics_patch.yaml": _metrics_patch(),
        "config/prometheus/kustomization.yaml": dump({"resources": ["monitor.yaml"]}),
        "config/prometheus/monitor.yaml": _monitor(project),
        "config/network-policy/kustomization.yaml": dump(
            {"resources": ["allow-metrics-traffic.yaml"]}
        ),
        "config/network-policy/allow-metrics-traffic.yaml": _network_policy(project),
    }


def _metrics_service(project: str) -> str:
    port = {"name": "https", "port": METRICS_PORT, "protocol": "TCP", "targetPort": METRICS_PORT}
    data = {
        **system_object(
            "v1", "Service", "controller-manager-metrics-service", project, manager=True
        ),
        "spec": {"ports": [port], "selector": selector(project)},
    }
    return dump(data, header="The operator's metrics endpoint (HTTPS) inside the cluster.")


def _metrics_patch() -> str:
    args = [
        "--metrics-bind-address=:8443",
        "--metrics-secure",
        "--metrics-require-rbac",
    ]
    ops = [
        {"op": "add", "path": "/spec/template/spec/containers/0/args/0", "value": arg}
        for arg in args
    ]
    return dump(
        ops,
        header="Serve metrics on :8443 over HTTPS, only to callers whose token the API server\n"
        "accepts and who may `get` the /metrics URL (see config/rbac/metrics_reader_role.yaml).",
    )


def _monitor(project: str) -> str:
    endpoint = {
        "path": "/metrics",
        "port": "https",
        "scheme": "https",
        "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
        # The operator's certificate is self-signed unless --metrics-cert-dir names one.
        "tlsConfig": {"insecureSkipVerify": True},
    }
    data = {
        **system_object(
            "monitoring.coreos.com/v1",
            "ServiceMonitor",
            "controller-manager-metrics-monitor",
            project,
            manager=True,
        ),
        "spec": {"endpoints": [endpoint], "selector": {"matchLabels": selector(project)}},
    }
    return dump(
        data,
        header="A Prometheus Operator ServiceMonitor for the metrics Service (needs the\n"
        "monitoring.coreos.com CRDs; enable it in config/default/kustomization.yaml).",
    )


def _network_policy(project: str) -> str:
    data = {
        **system_object("networking.k8s.io/v1", "NetworkPolicy", "allow-metrics-traffic", project),
        "spec": {
            "podSelector": {"matchLabels": selector(project)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [{"namespaceSelector": {"matchLabels": {"metrics": "enabled"}}}],
                    "ports": [{"port": METRICS_PORT, "protocol": "TCP"}],
                }
            ],
        },
    }
    return dump(
        data,
        header="Only pods in namespaces labelled metrics=enabled may reach the metrics port\n"
        "(enable it in config/default/kustomization.yaml).",
    )


def metrics_rbac_files() -> dict[str, str]:
    """The ClusterRoles (and binding) that guard and grant access to /metrics."""
    auth_rules: list[dict[str, Any]] = [
        {
            "apiGroups": ["authentication.k8s.io"],
            "resources": ["tokenreviews"],
            "verbs": ["create"],
        },
        {
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["subjectaccessreviews"],
            "verbs": ["create"],
        },
    ]
    return {
        "config/rbac/metrics_auth_role.yaml": dump(
            {
                "apiVersion": f"{RBAC_API}/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "metrics-auth-role"},
                "rules": auth_rules,
            },
            header="Lets the operator ask the API server who a metrics caller is and whether\n"
            "it may read /metrics (--metrics-require-rbac).",
        ),
        "config/rbac/metrics_auth_role_binding.yaml": dump(
            {
                "apiVersion": f"{RBAC_API}/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "metrics-auth-rolebinding"},
                "roleRef": {
                    "apiGroup": RBAC_API,
                    "kind": "ClusterRole",
                    "name": "metrics-auth-role",
                },
                "subjects": [service_account_subject()],
            }
        ),
        "config/rbac/metrics_reader_role.yaml": dump(
            {
                "apiVersion": f"{RBAC_API}/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "metrics-reader"},
                "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
            },
            header="Bind this role to whatever scrapes the operator's metrics.",
        ),
    }


def testing_files(project: str) -> dict[str, str]:
    """config/testing: the overlay the Molecule `default` scenario deploys (image
    `testing`, debug logs, a pull-policy patch chosen by molecule/default/prepare.yml)."""
    container_patch: dict[str, Any] = {"name": "manager"}

    def deployment_patch(**fields: Any) -> str:
        data = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "controller-manager", "namespace": "system"},
            "spec": {"template": {"spec": {"containers": [{**container_patch, **fields}]}}},
        }
        return dump(data)

    kustomization = {
        "namespace": "osdk-test",
        "namePrefix": "osdk-",
        "patches": [
            {"path": "manager_image.yaml"},
            {"path": "debug_logs_patch.yaml"},
            {"path": "../default/manager_metrics_patch.yaml", "target": {"kind": "Deployment"}},
        ],
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": ["../crd", "../rbac", "../manager"],
        "images": [{"name": "testing", "newName": "testing-operator"}],
    }
    files = {
        "config/testing/kustomization.yaml": dump(
            kustomization,
            header=f"What the Molecule `default` scenario deploys of {project}: the manager\n"
            "with image `testing` (set by molecule/default/prepare.yml) and debug logs.",
        ),
        "config/testing/manager_image.yaml": deployment_patch(image="testing"),
        "config/testing/debug_logs_patch.yaml": deployment_patch(
            env=[{"name": "ANSIBLE_DEBUG_LOGS", "value": "TRUE"}]
        ),
    }
    for policy in PULL_POLICIES:
        files[f"config/testing/pull_policy/{policy}.yaml"] = deployment_patch(
            imagePullPolicy=policy
        )
    return files

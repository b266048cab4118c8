"""The kustomize tree under config/ that `init` writes: manager, RBAC, default, scorecard.

Pure data dumped as YAML. `config/default` is what `make deploy` applies: the CRDs, the
RBAC and the manager Deployment, in `<project>-system` with names prefixed by
`<project>-`. The manager runs as a non-root user on a read-only root file system; the
runtime writes only under /tmp (an emptyDir), its probes answer on port 6789.
"""

from __future__ import annotations

from typing import Any

from runner.devtools.scaffold.files.metricsconfig import (
    metrics_files,
    metrics_rbac_files,
    testing_files,
)
from runner.devtools.scaffold.manifest import (
    RBAC_API,
    labels,
    selector,
    service_account_subject,
    system_object,
)
from runner.devtools.scaffold.yamltext import dump, dump_all

__all__ = [
    "ALL_VERBS",
    "HEALTH_PORT",
    "SCORECARD_IMAGE",
    "TERMINATION_GRACE_SECONDS",
    "config_files",
    "manager_role",
    "rbac_kustomization",
]

HEALTH_PORT = 6789
RECONCILE_TIMEOUT = "30m"
"""How long one Ansible run of a scaffolded operator may take before it is stopped."""
TERMINATION_GRACE_SECONDS = 45
"""The pod's terminationGracePeriodSeconds: the runtime's `--graceful-shutdown-timeout`
(30 s, as in the Go operator) for runs in flight, then a margin to release the Lease and
stop before the kubelet's SIGKILL."""
ALL_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")
SCORECARD_IMAGE = "quay.io/operator-framework/scorecard-test:v1.42.0"


def config_files(*, project: str, domain: str) -> dict[str, str]:
    """Every config/ file of a new project except the CSV base (see csvbase.py)."""
    return {
        "config/default/kustomization.yaml": _default_kustomization(project),
        "config/manager/kustomization.yaml": _manager_kustomization(project, domain),
        "config/manager/manager.yaml": _manager(project),
        "config/rbac/kustomization.yaml": rbac_kustomization(),
        "config/rbac/service_account.yaml": _service_account(project),
        "config/rbac/role.yaml": manager_role(project),
        "config/rbac/role_binding.yaml": _binding(
            project, "ClusterRoleBinding", "manager-rolebinding", "ClusterRole", "manager-role"
        ),
        "config/rbac/leader_election_role.yaml": _leader_election_role(project),
        "config/rbac/leader_election_role_binding.yaml": _binding(
            project, "RoleBinding", "leader-election-rolebinding", "Role", "leader-election-role"
        ),
        "config/crd/kustomization.yaml": _crd_kustomization(),
        "config/samples/kustomization.yaml": _samples_kustomization(),
        "config/scorecard/kustomization.yaml": _scorecard_kustomization(),
        "config/scorecard/bases/config.yaml": _scorecard_config(),
        "config/scorecard/patches/basic.config.yaml": _scorecard_patch(
            "basic", ["basic-check-spec"]
        ),
        "config/scorecard/patches/olm.config.yaml": _scorecard_patch(
            "olm",
            [
                "olm-bundle-validation",
                "olm-crds-have-validation",
                "olm-crds-have-resources",
                "olm-spec-descriptors",
                "olm-status-descriptors",
            ],
        ),
        "config/manifests/kustomization.yaml": _manifests_kustomization(project),
        **metrics_files(project),
        **metrics_rbac_files(),
        **testing_files(project),
    }


def _default_kustomization(project: str) -> str:
    data = {
        "namespace": f"{project}-system",
        "namePrefix": f"{project}-",
        "resources": ["../crd", "../rbac", "../manager", "metrics_service.yaml"],
        # Metrics on :8443 over HTTPS, for authorised callers only (see the patch).
        "patches": [{"path": "manager_metrics_patch.yaml", "target": {"kind": "Deployment"}}],
    }
    optional = (
        "# Uncomment to add a Prometheus ServiceMonitor (needs the Prometheus Operator's\n"
        "# CRDs) or a NetworkPolicy letting only namespaces labelled metrics=enabled scrape:\n"
        "# - ../prometheus\n"
        "# - ../network-policy\n"
    )
    return (
        dump(
            data,
            header="What `make deploy` applies: CRDs, RBAC, the manager and its metrics Service,\n"
            "in one namespace, with every name prefixed by the project name.",
        )
        + optional
    )


def _manager_kustomization(project: str, domain: str) -> str:
    data = {
        "resources": ["manager.yaml"],
        "images": [{"name": "controller", "newName": f"{domain}/{project}:0.0.1"}],
    }
    return dump(data, header="`make deploy IMG=...` sets the image (newName) of the manager.")


def _manager(project: str) -> str:
    manager_labels = labels(project, manager=True)
    pod_selector = selector(project)
    probe = {"path": "/healthz", "port": HEALTH_PORT}
    container: dict[str, Any] = {
        "name": "manager",
        "image": "controller",
        "args": [
            "--leader-elect",
            f"--leader-election-id={project}",
            f"--health-probe-bind-address=:{HEALTH_PORT}",
            # No run may hang forever: one stuck on a dead endpoint would hold a worker.
            f"--reconcile-timeout={RECONCILE_TIMEOUT}",
        ],
        "env": [
            {"name": "ANSIBLE_GATHERING", "value": "explicit"},
            # Names a replica and where its Lease lives (leader election, or --sharding).
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
            },
            {
                # Empty (all namespaces) unless OLM installs the operator for some.
                "name": "WATCH_NAMESPACE",
                "valueFrom": {
                    "fieldRef": {"fieldPath": "metadata.annotations['olm.targetNamespaces']"}
                },
            },
        ],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "livenessProbe": {"httpGet": probe, "initialDelaySeconds": 15, "periodSeconds": 20},
        "readinessProbe": {
            "httpGet": {**probe, "path": "/readyz"},
            "initialDelaySeconds": 5,
            "periodSeconds": 10,
        },
        "resources": {
            "limits": {"cpu": "500m", "memory": "768Mi"},
            "requests": {"cpu": "10m", "memory": "256Mi"},
        },
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "system", "labels": manager_labels},
    }
    deployment = {
        **system_object("apps/v1", "Deployment", "controller-manager", project, manager=True),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": pod_selector},
            "template": {
                "metadata": {
                    "annotations": {"kubectl.kubernetes.io/default-container": "manager"},
                    "labels": pod_selector,
                },
                "spec": {
                    "securityContext": {
                        "runAsNonRoot": True,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [container],
                    "volumes": [{"name": "tmp", "emptyDir": {}}],
                    "serviceAccountName": "controller-manager",
                    "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
                },
            },
        },
    }
    return dump_all(
        [namespace, deployment],
        header="The operator: one replica (more wait as leader-election standbys; with\n"
        "--sharding in place of --leader-elect every replica works on a share of the CRs),\n"
        "non-root, read-only root file system; the runtime writes only under /tmp.",
    )


def rbac_kustomization() -> str:
    files = [
        "service_account.yaml",
        "role.yaml",
        "role_binding.yaml",
        "leader_election_role.yaml",
        "leader_election_role_binding.yaml",
        "metrics_auth_role.yaml",
        "metrics_auth_role_binding.yaml",
        "metrics_reader_role.yaml",
    ]
    return dump(
        {"resources": files},
        header="RBAC of the operator and of its metrics; `create api` adds an admin, an editor\n"
        "and a viewer role per kind (for people, not used by the operator itself).",
    )


def _service_account(project: str) -> str:
    return dump(system_object("v1", "ServiceAccount", "controller-manager", project))


def _rule(groups: list[str], resources: list[str], verbs: tuple[str, ...]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": list(verbs)}


def manager_role(project: str) -> str:
    """The manager's ClusterRole before any API: what typical roles manage."""
    data = {
        "apiVersion": f"{RBAC_API}/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "manager-role", "labels": labels(project)},
        "rules": [
            _rule([""], ["configmaps", "pods", "secrets", "services"], ALL_VERBS),
            _rule([""], ["events"], ("create", "patch")),
            _rule(
                ["apps"], ["daemonsets", "deployments", "replicasets", "statefulsets"], ALL_VERBS
            ),
        ],
    }
    return dump(
        data,
        header="What the operator's roles may do. Add rules for every kind your roles manage;\n"
        "`create api` appends the rules for each new kind at the end.",
    )


def _binding(project: str, kind: str, name: str, role_kind: str, role: str) -> str:
    metadata: dict[str, Any] = {"name": name, "labels": labels(project)}
    if kind == "RoleBinding":
        metadata["namespace"] = "system"
    data = {
        "apiVersion": f"{RBAC_API}/v1",
        "kind": kind,
        "metadata": metadata,
        "roleRef": {"apiGroup": RBAC_API, "kind": role_kind, "name": role},
        "subjects": [service_account_subject()],
    }
    return dump(data)


def _leader_election_role(project: str) -> str:
    data = {
        **system_object(f"{RBAC_API}/v1", "Role", "leader-election-role", project),
        "rules": [
            _rule(["coordination.k8s.io"], ["leases"], ALL_VERBS),
            _rule([""], ["events"], ("create", "patch")),
        ],
    }
    return dump(data, header="Leader election: a Lease in the operator's namespace.")


def _crd_kustomization() -> str:
    return dump({"resources": []}, header="The CRDs; `create api` adds one line per kind.")


def _samples_kustomization() -> str:
    return dump({"resources": []}, header="One sample per kind; `create api` adds them.")


def _manifests_kustomization(project: str) -> str:
    data = {
        "resources": [
            f"bases/{project}.clusterserviceversion.yaml",
            "../default",
            "../samples",
            "../scorecard",
        ]
    }
    return dump(data, header="Everything `make bundle` reads: the CSV base and the deployment.")


def _scorecard_kustomization() -> str:
    target = {
        "group": "scorecard.operatorframework.io",
        "version": "v1alpha3",
        "kind": "Configuration",
        "name": "config",
    }
    data = {
        "resources": ["bases/config.yaml"],
        "patches": [
            {"path": "patches/basic.config.yaml", "target": target},
            {"path": "patches/olm.config.yaml", "target": target},
        ],
    }
    return dump(data, header="Scorecard tests that go into bundle/tests/scorecard/config.yaml.")


def _scorecard_config() -> str:
    data = {
        "apiVersion": "scorecard.operatorframework.io/v1alpha3",
        "kind": "Configuration",
        "metadata": {"name": "config"},
        "stages": [{"parallel": True, "tests": []}],
    }
    return dump(data)


def _scorecard_patch(suite: str, tests: list[str]) -> str:
    return dump(
        [
            {
                "op": "add",
                "path": "/stages/0/tests/-",
                "value": {
                    "entrypoint": ["scorecard-test", test],
                    "image": SCORECARD_IMAGE,
                    "labels": {"suite": suite, "test": f"{test}-test"},
                },
            }
            for test in tests
        ]
    )

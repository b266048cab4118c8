"""OLM's names and fixed values: annotation keys, media types, install modes, kinds.

Kept in one place so the generator, the validator and the catalog agree on every key.
"""

from __future__ import annotations

from runner import __version__

CSV_API_VERSION = "operators.coreos.com/v1alpha1"
CSV_KIND = "ClusterServiceVersion"
MEDIATYPE_REGISTRY_V1 = "registry+v1"
MANIFESTS_DIR = "manifests/"
METADATA_DIR = "metadata/"
SCORECARD_DIR = "tests/scorecard/"

# bundle/metadata/annotations.yaml keys, which bundle.Dockerfile repeats as LABELs.
MEDIATYPE = "operators.operatorframework.io.bundle.mediatype.v1"
MANIFESTS = "operators.operatorframework.io.bundle.manifests.v1"
METADATA = "operators.operatorframework.io.bundle.metadata.v1"
PACKAGE = "operators.operatorframework.io.bundle.package.v1"
CHANNELS = "operators.operatorframework.io.bundle.channels.v1"
DEFAULT_CHANNEL = "operators.operatorframework.io.bundle.channel.default.v1"
METRICS_BUILDER = "operators.operatorframework.io.metrics.builder"
METRICS_MEDIATYPE = "operators.operatorframework.io.metrics.mediatype.v1"
METRICS_LAYOUT = "operators.operatorframework.io.metrics.project_layout"
TEST_MEDIATYPE = "operators.operatorframework.io.test.mediatype.v1"
TEST_CONFIG = "operators.operatorframework.io.test.config.v1"
REQUIRED_ANNOTATIONS = (MEDIATYPE, MANIFESTS, METADATA, PACKAGE, CHANNELS)

# CSV metadata.annotations keys.
ALM_EXAMPLES = "alm-examples"
SKIP_RANGE = "olm.skipRange"
CONTAINER_IMAGE = "containerImage"
CAPABILITIES = "capabilities"
BUILDER = "operators.operatorframework.io/builder"
PROJECT_LAYOUT = "operators.operatorframework.io/project_layout"
# Annotation keys OLM reads case-sensitively (operator-framework/api rejects other cases).
CASE_SENSITIVE_ANNOTATIONS = (
    "olm.operatorGroup",
    "olm.operatorNamespace",
    "olm.targetNamespaces",
    "olm.providedAPIs",
    SKIP_RANGE,
)

BUILDER_VALUE = f"ansible-operator-v{__version__}"
INSTALL_MODE_TYPES = ("OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces")
DEFAULT_INSTALL_MODES = tuple(
    {"supported": mode == "AllNamespaces", "type": mode} for mode in INSTALL_MODE_TYPES
)
# Pod Security admission (GA in 1.25) enforces the restricted profile our manager
# Deployment is written for; every API the runtime uses is older than that.
DEFAULT_MIN_KUBE_VERSION = "1.25.0"
SCORECARD_IMAGE = "quay.io/operator-framework/scorecard-test:v1.42.3"

# Kinds a registry+v1 bundle may carry besides the CSV, and whether they are namespaced
# (operator-registry's supported resources).
SUPPORTED_KINDS = {
    "ClusterServiceVersion": True,
    "CustomResourceDefinition": False,
    "ClusterRole": False,
    "ClusterRoleBinding": False,
    "Service": True,
    "ServiceAccount": True,
    "Role": True,
    "RoleBinding": True,
    "PrometheusRule": True,
    "ServiceMonitor": True,
    "Secret": True,
    "ConfigMap": True,
    "PodDisruptionBudget": True,
    "PriorityClass": False,
    "VerticalPodAutoscaler": False,
    "ConsoleYAMLSample": False,
    "ConsoleQuickStart": False,
    "ConsoleCLIDownload": False,
    "ConsoleLink": False,
    "ConsolePlugin": False,
    "NetworkPolicy": True,
}
# The compressed size limit of a bundle (what fits an etcd object), and the warning mark.
MAX_BUNDLE_BYTES = 1 << 20
WARN_BUNDLE_FRACTION = 0.85

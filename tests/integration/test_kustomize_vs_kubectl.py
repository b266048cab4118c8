"""Our kustomize subset (`runner.devtools.packaging.kustomize`, `patches`) against the real one.

`make bundle` renders `config/` without the kustomize binary; the result must be what
`kubectl kustomize` (kustomize built into the cached kubectl) makes of the same tree:
every kustomization of the sample operator and of the scaffolded guestbook project, and
small trees for each field the subset supports. Objects are compared one by one, keyed
by kind, namespace and name. Two differences are kept on purpose: kustomize sorts the
objects by kind where we keep the order of `resources`, and kustomize refuses files
outside a kustomization's directory (`../default/patch.yaml`) unless given
`--load-restrictor LoadRestrictionsNone`, which this comparison passes.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.bundles import GUESTBOOK

from runner.devtools.cluster import build
from runner.devtools.cluster.components import components
from runner.devtools.packaging import kustomize

REPO = Path(__file__).resolve().parents[2]

Key = tuple[str, str, str]


@pytest.fixture(scope="module")
def kubectl() -> Path:
    return build.ensure_built([components()["kubectl"]], root=build.cache_root())["kubectl"]


def kubectl_kustomize(kubectl: Path, directory: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [str(kubectl), "kustomize", "--load-restrictor", "LoadRestrictionsNone", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [obj for obj in yaml.safe_load_all(done.stdout) if obj]


def keyed(objects: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    found: dict[Key, dict[str, Any]] = {}
    for obj in objects:
        meta = obj.get("metadata") or {}
        key = (str(obj["kind"]), str(meta.get("namespace", "")), str(meta["name"]))
        assert key not in found, f"{key} twice"
        found[key] = obj
    return found


def assert_same_as_kubectl(kubectl: Path, directory: Path) -> None:
    ours = keyed(kustomize.build(directory))
    theirs = keyed(kubectl_kustomize(kubectl, directory))
    assert sorted(ours) == sorted(theirs)
    for key, obj in ours.items():
        # YAML scalars as kustomize writes them: compare through JSON
        assert json.loads(json.dumps(obj)) == theirs[key], key


def kustomizations(root: Path, project: str) -> Iterator[Any]:
    for path in sorted(root.glob("config/*/kustomization.yaml")):
        yield pytest.param(path.parent, id=f"{project}/{path.parent.name}")


@pytest.mark.parametrize(
    "directory", [*kustomizations(REPO, "sample"), *kustomizations(GUESTBOOK, "guestbook")]
)
def test_project_trees_render_as_kubectl_kustomize(kubectl: Path, directory: Path) -> None:
    assert_same_as_kubectl(kubectl, directory)


DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: app, labels: {tier: web}}
spec:
  selector: {matchLabels: {app: a}}
  template:
    metadata: {labels: {app: a}}
    spec:
      serviceAccountName: runner
      containers:
      - name: main
        image: example.com/app:1.0
        env: [{name: A, value: "1"}, {name: B, value: "2"}]
        envFrom: [{configMapRef: {name: settings}}]
      - name: side
        image: nginx
"""
OTHERS = """\
apiVersion: v1
kind: ServiceAccount
metadata: {name: runner}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {k: v}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: runner-binding}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: runner-role}
subjects: [{kind: ServiceAccount, name: runner, namespace: default}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: runner-role}
rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]
"""


@pytest.mark.parametrize(
    ("kustomization", "files"),
    [
        pytest.param(
            "patches: [{path: p.yaml}]\n",
            {
                "p.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: app}\n"
                "spec:\n  template:\n    spec:\n      containers:\n      - name: main\n"
                "        env: [{name: C, value: '3'}, {name: A, value: '9'}]\n"
                "      - name: extra\n        image: alpine\n"
            },
            id="strategic-merge-list-order",
        ),
        pytest.param(
            "patchesStrategicMerge: [p.yaml]\n",
            {
                "p.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: app}\n"
                "spec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n"
                "      - {name: side, $patch: delete}\n"
            },
            id="strategic-merge-delete",
        ),
        pytest.param(
            "patches:\n- target: {kind: Deployment, name: app}\n  patch: |-\n"
            "    - {op: add, path: /spec/template/spec/containers/0/args, value: [--x]}\n"
            "    - {op: replace, path: /spec/selector/matchLabels/app, value: b}\n"
            "    - {op: remove, path: /metadata/labels/tier}\n",
            {},
            id="json6902-inline-with-target",
        ),
        pytest.param(
            "patchesJson6902:\n- target: {group: apps, version: v1, kind: Deployment, name: app}\n"
            "  path: j.yaml\n",
            {"j.yaml": "- {op: add, path: /spec/template/metadata/annotations, value: {a: b}}\n"},
            id="json6902-file",
        ),
        pytest.param(
            "namespace: team\nnamePrefix: p-\nnameSuffix: -s\n",
            {},
            id="namespace-prefix-suffix-references",
        ),
        pytest.param(
            "labels:\n- pairs: {team: a}\n  includeSelectors: true\n"
            "- pairs: {plain: b}\ncommonAnnotations: {note: x}\n",
            {},
            id="labels-and-annotations",
        ),
        pytest.param("commonLabels: {team: a}\n", {}, id="common-labels"),
        pytest.param(
            "images:\n- {name: example.com/app, newName: registry.local/app, newTag: '2.0'}\n"
            "- {name: nginx, digest: 'sha256:" + "0" * 64 + "'}\n",
            {},
            id="images",
        ),
    ],
)
def test_fields_render_as_kubectl_kustomize(
    kubectl: Path, tmp_path: Path, kustomization: str, files: dict[str, str]
) -> None:
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "deployment.yaml").write_text(DEPLOYMENT)
    (tmp_path / "base" / "others.yaml").write_text(OTHERS)
    (tmp_path / "base" / "kustomization.yaml").write_text(
        "resources: [deployment.yaml, others.yaml]\n"
    )
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text("resources: [../base]\n" + kustomization)
    for name, content in files.items():
        (overlay / name).write_text(content)
    assert_same_as_kubectl(kubectl, overlay)

"""The repository's memcached sample as a scaffolded project would have it.

The sample (watches.yaml, roles/memcached, config/) is laid out like a project made by
`ansible-operator init --domain example.com` and `create api --group cache --version
v1alpha1 --kind Memcached`; `expected_files()` is what the renderers produce for those
paths, and a unit test checks the repository against it. After changing a renderer,
rewrite the sample's files with:

    .venv/bin/python tests/support/sample_scaffold.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from runner.devtools.scaffold.csvbase import CSVInfo, csv_path, info_from_csv
from runner.devtools.scaffold.generate import api_plan, init_plan

REPO = Path(__file__).resolve().parents[2]
DOMAIN = "example.com"
PROJECT = "memcached-operator"
API = {"group": "cache", "version": "v1alpha1", "kind": "Memcached"}

# Used only when the CSV base does not exist yet; afterwards its people-facing fields are
# read back from the file, so editing them there is all it takes.
_ICON = (
    "PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9IjAgMCA2NCA2NCI+PHJl"
    "Y3Qgd2lkdGg9IjY0IiBoZWlnaHQ9IjY0IiByeD0iMTIiIGZpbGw9IiMyZTdkMzIiLz48dGV4dCB4PSIzMiIg"
    "eT0iNDIiIGZvbnQtc2l6ZT0iMjgiIHRleHQtYW5jaG9yPSJtaWRkbGUiIGZpbGw9IiNmZmYiIGZvbnQtZmFt"
    "aWx5PSJzYW5zLXNlcmlmIj5NPC90ZXh0Pjwvc3ZnPg=="
)
MEMCACHED_INFO = CSVInfo(
    display_name="Memcached Operator",
    description=(
        "Runs memcached, the in-memory key-value cache, on Kubernetes.\n\n"
        "Create a `Memcached` resource with the number of replicas in `spec.size` (and "
        "optionally the `image`); the operator keeps a Deployment of that many memcached "
        "pods and a Service named after the resource in its namespace, lists the pods in "
        "`status.nodes`, and removes everything when the resource is deleted.\n\n"
        "It is the sample of ansible-operator for Python: an Ansible role reconciles each "
        "resource, and the status conditions show the result of every run.\n"
    ),
    keywords=("memcached", "cache", "key-value", "ansible"),
    maintainers=(("ansible-operator for Python maintainers", "maintainers@example.com"),),
    provider=("ansible-operator for Python", "https://example.com"),
    links=(
        ("Memcached", "https://memcached.org"),
        ("Memcached documentation", "https://github.com/memcached/memcached/wiki"),
    ),
    icon_base64=_ICON,
    icon_mediatype="image/svg+xml",
)

# Scaffold output the sample keeps in its own, hand-written form.
_HAND_WRITTEN = frozenset({"config/samples/cache_v1alpha1_memcached.yaml"})
_TOP_LEVEL = frozenset({"PROJECT", "requirements.yml", "playbooks/.placeholder"})
# The top-level Dockerfile builds the runtime image; the sample's image is this one.
_RENAMED = {"Dockerfile": "sample.Dockerfile"}


def expected_files(repo: Path = REPO) -> dict[str, str]:
    """{path in the repository: text} for every file of the sample that comes from the
    renderers."""
    csv_file = repo / csv_path(PROJECT)
    info = (
        info_from_csv(csv_file.read_text(encoding="utf-8"), source=str(csv_file))
        if csv_file.is_file()
        else MEMCACHED_INFO
    )
    init = init_plan(domain=DOMAIN, project_name=PROJECT, info=info).create
    api = api_plan(init, **API)
    selected = {}
    for path, text in {**init, **api.create, **api.update}.items():
        if path in _HAND_WRITTEN:
            continue
        if path.startswith("config/") or path in _TOP_LEVEL:
            selected[path] = text
        elif path in _RENAMED:
            selected[_RENAMED[path]] = text
    return selected


def main() -> int:
    for path, text in sorted(expected_files().items()):
        target = REPO / path
        if target.is_file() and target.read_text(encoding="utf-8") == text:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""OLM v1's objects and how their status is read (pure)."""

from __future__ import annotations

import base64
from typing import Any

from runner.devtools.olm.v1 import objects as v1model


def test_the_webhook_is_called_at_a_loopback_url_with_the_clusters_ca() -> None:
    hook = v1model.catalogd_webhook(41234, b"-----BEGIN CERTIFICATE-----\n")
    webhook = hook["webhooks"][0]
    assert webhook["clientConfig"]["url"] == (
        "https://127.0.0.1:41234/mutate-olm-operatorframework-io-v1-clustercatalog"
    )
    assert base64.b64decode(webhook["clientConfig"]["caBundle"]).startswith(b"-----BEGIN")
    assert "service" not in webhook["clientConfig"]
    assert webhook["rules"][0]["resources"] == ["clustercatalogs"]


def test_an_extension_selects_its_own_catalog_and_channel() -> None:
    ext = v1model.cluster_extension(
        "memcached-operator",
        package="memcached-operator",
        namespace="demo",
        channel="alpha",
        catalog="memcached-operator-catalog",
    )
    source = ext["spec"]["source"]["catalog"]
    assert ext["spec"]["namespace"] == "demo"
    assert source["packageName"] == "memcached-operator"
    assert source["channels"] == ["alpha"]
    assert source["selector"]["matchLabels"] == {
        v1model.CATALOG_NAME_LABEL: "memcached-operator-catalog"
    }
    assert "serviceAccount" not in ext["spec"]  # ignored (deprecated) since OLM v1.10


def _catalog(ref: str, generation: int, observed: int, reason: str) -> dict[str, Any]:
    return {
        "metadata": {"generation": generation},
        "spec": {"source": {"image": {"ref": ref}}},
        "status": {
            "conditions": [
                {"type": "Serving", "status": "True", "reason": "Available"},
                {
                    "type": "Progressing",
                    "status": "True",
                    "reason": reason,
                    "observedGeneration": observed,
                },
            ]
        },
    }


def test_a_catalog_serves_the_new_image_once_its_generation_is_unpacked() -> None:
    assert v1model.catalog_serving(_catalog("r/c:2", 2, 2, "Succeeded"), "r/c:2")
    assert not v1model.catalog_serving(_catalog("r/c:2", 2, 1, "Succeeded"), "r/c:2")
    assert not v1model.catalog_serving(_catalog("r/c:1", 1, 1, "Succeeded"), "r/c:2")
    assert not v1model.catalog_serving(_catalog("r/c:2", 2, 2, "Retrying"), "r/c:2")
    assert not v1model.catalog_serving(None, "r/c:2")


def test_an_extension_retrying_a_refused_preflight_is_not_installed_yet() -> None:
    extension = {
        "status": {
            "install": {"bundle": {"name": "memcached-operator.v0.2.0", "version": "0.2.0"}},
            "conditions": [
                {"type": "Installed", "status": "True", "reason": "Succeeded"},
                {
                    "type": "Progressing",
                    "status": "True",
                    "reason": "Retrying",
                    "message": 'validating upgrade for CRD "m.example.com": type changed',
                },
            ],
        }
    }
    state = v1model.extension_state(extension)
    assert state.installed and state.installed_version == "0.2.0"
    assert state.retrying and state.refused and "type changed" in state.message
    assert not v1model.healthy_extension(extension)
    lines = v1model.status_lines("ClusterExtension", extension)
    assert "installed memcached-operator.v0.2.0 0.2.0" in lines[0]
    assert any("Progressing=True Retrying: validating upgrade for CRD" in line for line in lines)


def test_plain_http_registries_are_marked_insecure() -> None:
    text = v1model.registries_conf(["127.0.0.1:5000"])
    assert 'location = "127.0.0.1:5000"' in text and "insecure = true" in text
    assert "[[registry]]" not in v1model.registries_conf([])

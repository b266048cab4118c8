"""Version pins, binary names, kubeconfig rendering and early errors of the cluster build."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

import pytest

from runner.devtools.cluster import build
from runner.devtools.cluster import processes as process
from runner.devtools.cluster.components import (
    Component,
    GoModule,
    components,
    kubernetes_ldflags,
    read_required_version,
)
from runner.devtools.cluster.kubeconfigdoc import admin_kubeconfig
from runner.errors import ClusterError


def test_versions_come_from_the_wrapper_modules() -> None:
    found = components()
    assert list(found) == [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kubectl",
        "kwok",
    ]
    assert found["kube-apiserver"].version == found["kubectl"].version
    assert found["kube-apiserver"].version.startswith("v1.")
    assert found["etcd"].version.startswith("v3.")
    assert f"gitVersion={found['kube-apiserver'].version}" in " ".join(
        found["kube-apiserver"].ldflags
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("require example.com/m v1.2.3\n", "v1.2.3", id="single-line"),
        pytest.param("require (\n\texample.com/m v0.9.0 // indirect\n)\n", "v0.9.0", id="block"),
        pytest.param(
            "require (\n\texample.com/mx v9.9.9\n\texample.com/m v1.0.0\n)\n", "v1.0.0", id="prefix"
        ),
    ],
)
def test_read_required_version(tmp_path: Path, text: str, expected: str) -> None:
    go_mod = tmp_path / "go.mod"
    go_mod.write_text("module x\n\ngo 1.24\n\n" + text)
    assert read_required_version(go_mod, "example.com/m") == expected


def test_read_required_version_names_the_file_when_missing(tmp_path: Path) -> None:
    go_mod = tmp_path / "go.mod"
    go_mod.write_text("module x\n")
    with pytest.raises(ClusterError, match=r"go\.mod: no `require example\.com/m"):
        read_required_version(go_mod, "example.com/m")


def test_kubernetes_ldflags() -> None:
    assert kubernetes_ldflags("v1.36.3") == (
        "-X k8s.io/component-base/version.gitVersion=v1.36.3",
        "-X k8s.io/component-base/version.gitMajor=1",
        "-X k8s.io/component-base/version.gitMinor=36",
        "-X k8s.io/component-base/version.gitTreeState=clean",
    )


@pytest.mark.parametrize(
    ("package", "name"),
    [
        ("go.etcd.io/etcd/server/v3", "server"),
        ("k8s.io/kubernetes/cmd/kube-apiserver", "kube-apiserver"),
        ("sigs.k8s.io/kwok/cmd/kwok", "kwok"),
    ],
)
def test_go_binary_name(package: str, name: str) -> None:
    assert build.go_binary_name(package) == name


def test_binary_path_is_versioned(tmp_path: Path) -> None:
    etcd = components()["etcd"]
    path = build.binary_path(etcd, tmp_path)
    assert path == tmp_path / "bin" / f"etcd-{etcd.version}" / "etcd"


def test_cache_root_honours_the_environment(tmp_path: Path) -> None:
    assert build.cache_root({"ANSIBLE_OPERATOR_CACHE": str(tmp_path)}) == tmp_path
    assert build.cache_root({}).parts[-2:] == (".cache", "ansible-operator")


def test_admin_kubeconfig() -> None:
    config = admin_kubeconfig(
        server="https://127.0.0.1:6443", ca_pem=b"PEM", token="tok", name="local"
    )
    assert config["current-context"] == "local"
    cluster = config["clusters"][0]["cluster"]
    assert cluster["server"] == "https://127.0.0.1:6443"
    assert base64.b64decode(cluster["certificate-authority-data"]) == b"PEM"
    assert config["users"][0]["user"] == {"token": "tok"}


def test_go_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ClusterError, match="Go is not installed"):
        build.check_go([])


def test_go_too_old_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text("module x\n\ngo 9.99.0\n")
    with pytest.raises(ClusterError, match=r"too old: .*go\.mod needs go 9\.99\.0"):
        build.check_go([GoModule(tmp_path, "example.com/x")])


@pytest.mark.skipif(shutil.which("go") is None, reason="needs Go")
def test_build_failure_names_the_log(tmp_path: Path) -> None:
    module = tmp_path / "wrapper"
    (module / "broken").mkdir(parents=True)
    (module / "go.mod").write_text("module example.com/wrapper\n\ngo 1.22\n")
    (module / "broken" / "main.go").write_text("package main\n\nfunc main() { oops }\n")
    broken = Component("broken", GoModule(module, "example.com/wrapper"), "./broken")
    (module / "go.mod").write_text(
        "module example.com/wrapper\n\ngo 1.22\n\nrequire example.com/wrapper v0.0.0\n"
    )
    with pytest.raises(ClusterError, match=r"building broken failed .*log: .*build-wrapper"):
        build.ensure_built([broken], root=tmp_path / "cache", progress=lambda _m: None)
    assert not build.binary_path(broken, tmp_path / "cache").exists()


def test_port_in_use_is_detected() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind((process.LOOPBACK, 0))
        sock.listen()
        assert process.port_in_use(sock.getsockname()[1])
    assert not process.port_in_use(process.free_port())


def test_free_ports_lie_below_the_ephemeral_range_and_are_never_given_twice() -> None:
    # An outgoing connection may take any free port of the ephemeral range between our
    # probe and the server's bind; ports below it are never given to one.
    ports = [process.free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    assert all(20000 <= port < process.ephemeral_range_start() for port in ports)

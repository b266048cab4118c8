"""Image tooling without a container engine: containers.conf per machine, the build and
push commands, pip access for builds, the base image's key, the runtime's requirements
and collections, the registry's configuration, the collections `version` reports."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from runner.devtools import images
from runner.devtools.cluster import registry
from runner.devtools.cluster.components import registry as registry_component

REPO = Path(__file__).resolve().parents[4]


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"image_{name}", REPO / "image" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_containers_conf_on_a_cgroup_v1_machine_without_systemd() -> None:
    text = images.containers_conf(
        images.MachineFacts(cgroup_v2=False, nofile_hard=20000, nproc_hard=96364, systemd=False)
    )
    assert 'default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]' in text
    assert 'runtime = "runc"' in text
    assert 'cgroup_manager = "cgroupfs"' in text
    assert 'events_logger = "file"' in text


def test_containers_conf_keeps_the_defaults_where_they_work() -> None:
    text = images.containers_conf(
        images.MachineFacts(cgroup_v2=True, nofile_hard=10**9, nproc_hard=10**9, systemd=True)
    )
    assert "runtime" not in text
    assert f"nofile={images.PODMAN_DEFAULT_NOFILE}:" in text
    assert 'cgroup_manager = "systemd"' in text


def test_tool_environ_respects_a_given_containers_conf(tmp_path: Path) -> None:
    given = images.tool_environ("podman", tmp_path, {"CONTAINERS_CONF": "/etc/mine.conf"})
    assert given["CONTAINERS_CONF"] == "/etc/mine.conf"
    ours = images.tool_environ("buildah", tmp_path, {})
    assert Path(ours["CONTAINERS_CONF"]).read_text().startswith("# Written by")
    assert images.tool_environ("docker", tmp_path, {})["DOCKER_BUILDKIT"] == "1"


def test_unknown_tool_is_named() -> None:
    with pytest.raises(Exception, match="CONTAINER_TOOL=nerdctl: use one of docker, podman"):
        images.check_tool("nerdctl")


def test_build_argv_passes_arguments_and_secrets() -> None:
    secrets = {"pip.conf": Path("/x/pip.conf"), "pip-ca": Path("/etc/ca.crt")}
    argv = images.build_argv(
        "podman",
        tag="t:1",
        dockerfile="Dockerfile",
        context=".",
        build_args={"BASE_IMAGE": "b:1"},
        secrets=secrets,
    )
    assert argv[:4] == ["podman", "build", "--network", "host"]
    assert argv[-1] == "."
    assert "--build-arg BASE_IMAGE=b:1" in " ".join(argv)
    assert "--secret id=pip.conf,src=/x/pip.conf --secret id=pip-ca,src=/etc/ca.crt" in " ".join(
        argv
    )
    buildah = images.build_argv(
        "buildah", tag="t", dockerfile="D", context=".", build_args={}, secrets={}
    )
    assert buildah[:2] == ["buildah", "bud"]
    docker = images.build_argv(
        "docker", tag="t", dockerfile="D", context=".", build_args={}, secrets={}
    )
    assert "--network" not in docker


@pytest.mark.parametrize(
    ("image", "insecure"),
    [
        ("127.0.0.1:5000/op:v1", True),
        ("localhost:5000/op:v1", True),
        ("quay.io/op:v1", False),
        ("example.com/memcached-operator:v0.1.0", False),
        ("localhost/op:v1", False),
    ],
)
def test_push_to_a_loopback_registry_is_plain_http(image: str, insecure: bool) -> None:
    assert ("--tls-verify=false" in images.push_argv("podman", image)) is insecure
    assert "--tls-verify=false" not in images.push_argv("docker", image)


LISTED = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.index-url='https://mirror.example/simple'
install.no-compile='true'
"""


def test_pip_config_for_the_build_leaves_out_host_paths() -> None:
    text = images.pip_config_text(LISTED, {"PIP_TRUSTED_HOST": "mirror.example"})
    assert text == (
        "[global]\nindex-url = https://mirror.example/simple\ntrusted-host = mirror.example\n"
        "[install]\nno-compile = true\n"
    )
    assert images.pip_config_text("", {}) == ""


def test_pip_ca_bundle_order(tmp_path: Path) -> None:
    mine = tmp_path / "mine.crt"
    mine.write_text("x")
    assert images.pip_ca_bundle("", {"PIP_CERT": str(mine)}) == mine
    assert images.pip_ca_bundle(f"global.cert='{mine}'\n", {}) == mine
    assert images.pip_ca_bundle("", {"PIP_CERT": str(tmp_path / "missing")}) != tmp_path / "missing"


def test_base_key_follows_its_inputs(tmp_path: Path) -> None:
    sources = images.debian_sources()
    target = tmp_path / "rootfs.tar"
    key = images.base_key(images.mmdebstrap_argv(target, sources))
    assert key == images.base_key(images.mmdebstrap_argv(target, sources))
    more = (*images.BASE_PACKAGES, "curl")
    assert key != images.base_key(images.mmdebstrap_argv(target, sources, packages=more))
    assert key != images.base_key(images.mmdebstrap_argv(target, sources, suite="trixie"))
    assert key != images.base_key(images.mmdebstrap_argv(target, images.debian_sources("trixie")))
    assert images.base_tag(key) == f"localhost/ansible-operator-base:bookworm-{key}"


def test_mmdebstrap_makes_a_venv_and_no_apt_lists(tmp_path: Path) -> None:
    argv = images.mmdebstrap_argv(tmp_path / "r.tar", images.debian_sources())
    assert "--include=python3,python3-venv,tini,ca-certificates" in argv
    assert any("python3 -m venv /opt/venv" in a for a in argv)
    assert any("var/lib/apt/lists" in a for a in argv)
    assert "--dpkgopt=path-exclude=/usr/share/doc/*" in argv
    assert argv[-3:] == list(images.debian_sources())


def test_import_puts_the_venv_first_on_path(tmp_path: Path) -> None:
    argv = images.import_argv("buildah", tmp_path / "r.tar", "localhost/b:1")
    assert argv[:2] == ["podman", "import"]
    assert (
        "ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        in argv
    )


def test_runtime_requirements_drop_the_ansible_distribution() -> None:
    lines = _script("requirements").requirements(REPO / "pyproject.toml", "2.18")
    assert lines[0] == "ansible-core==2.18.*"
    names = [line.split(">")[0].split("=")[0].split("<")[0] for line in lines[1:]]
    assert "ansible" not in names and "ansible-core" not in names
    assert {"ansible-runner", "kubernetes", "kubernetes-asyncio"} <= set(names)


def test_shipped_collections_list() -> None:
    select = _script("select_collections")
    wanted = dict(select.wanted(REPO / "image" / "collections.txt"))
    assert wanted["kubernetes.core"] is True
    assert wanted["community.docker"] is True
    assert wanted["cloud.common"] is False  # in ansible 11.x only
    assert set(select.ANSIBLE_FOR_CORE) == {"2.18", "2.19"}


def test_registry_config_listens_on_loopback_only(tmp_path: Path) -> None:
    document = registry.config(port=5000, debug_port=5001, storage=tmp_path, tls=None)
    assert document["http"]["addr"] == "127.0.0.1:5000"
    assert document["http"]["debug"]["addr"] == "127.0.0.1:5001"
    assert "tls" not in document["http"]
    assert document["storage"]["filesystem"]["rootdirectory"] == str(tmp_path)
    tls = registry.config(
        port=5000, debug_port=5001, storage=tmp_path, tls=(tmp_path / "c", tmp_path / "k")
    )
    assert tls["http"]["tls"] == {"certificate": str(tmp_path / "c"), "key": str(tmp_path / "k")}
    info = registry.RegistryInfo("127.0.0.1", 5000, tls=True)
    assert (info.address, info.url) == ("127.0.0.1:5000", "https://127.0.0.1:5000")


def test_registry_is_pinned_in_its_wrapper_module() -> None:
    component = registry_component()
    assert component.package == "github.com/distribution/distribution/v3/cmd/registry"
    assert component.version.startswith("v3.")
    assert f"version.version={component.version}" in component.ldflags[0]

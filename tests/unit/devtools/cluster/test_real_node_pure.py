"""The real node's pure parts: image archives, names, configuration files, subnets."""

from __future__ import annotations

import hashlib
import io
import ipaddress
import json
import tarfile
import tomllib
from pathlib import Path

import pytest
import yaml

from runner.devtools.cluster.realnode import leftovers as sweep
from runner.devtools.cluster.realnode import machine, nodeconfig
from runner.devtools.cluster.realnode import node as realnode
from runner.devtools.cluster.realnode import ociarchive as oci
from runner.devtools.cluster.realnode.nodeconfig import NodeLayout


def _members(archive: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {
            m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }


def test_image_archive_is_an_oci_layout_naming_its_image() -> None:
    spec = oci.ImageSpec(
        name="localhost/x/pause:1",
        files={"pause": oci.ImageFile(b"binary"), "etc/conf": oci.ImageFile(b"c", 0o644)},
        entrypoint=("/pause", "-P"),
        user="65535:65535",
    )

    members = _members(oci.image_archive(spec))

    index = json.loads(members["index.json"])
    (entry,) = index["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == "localhost/x/pause:1"
    manifest_blob = members[f"blobs/sha256/{entry['digest'].split(':')[1]}"]
    assert hashlib.sha256(manifest_blob).hexdigest() == entry["digest"].split(":")[1]
    manifest = json.loads(manifest_blob)
    config = json.loads(members[f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}"])
    assert config["config"]["Entrypoint"] == ["/pause", "-P"]
    assert config["config"]["User"] == "65535:65535"
    layer = members[f"blobs/sha256/{manifest['layers'][0]['digest'].split(':')[1]}"]
    assert config["rootfs"]["diff_ids"] == [f"sha256:{hashlib.sha256(layer).hexdigest()}"]
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        modes = {m.name: (m.type, m.mode) for m in tar.getmembers()}
    assert modes == {
        "etc": (tarfile.DIRTYPE, 0o755),
        "etc/conf": (tarfile.REGTYPE, 0o644),
        "pause": (tarfile.REGTYPE, 0o755),
    }


def test_image_archive_is_a_function_of_its_inputs() -> None:
    spec = oci.ImageSpec(name="a:1", files={"f": oci.ImageFile(b"x")})

    assert oci.image_archive(spec) == oci.image_archive(spec)


def test_layout_names_fit_the_kernel_and_iptables_limits(tmp_path: Path) -> None:
    layout = NodeLayout.of(tmp_path / "a")

    assert len(layout.bridge) <= 15
    assert all(len(layout.chain(p)) <= 28 for p in ("INPUT", "FORWARD", "DNAT"))
    assert len(str(layout.containerd_socket)) + len(".ttrpc") < 108
    # The kubelet makes sockets below its root directory, e.g. pod-resources/<10 digits>.
    deep = NodeLayout.of(tmp_path / ("x" * 200))
    assert len(str(deep.kubelet_root / "pod-resources" / "1779924232")) < 108
    assert NodeLayout.of(tmp_path / "b").ident != layout.ident
    assert NodeLayout.of(tmp_path / "a").ident == layout.ident


@pytest.mark.parametrize(
    ("used", "start", "expected"),
    [
        pytest.param([], 7, "10.245.7.0/24", id="free"),
        pytest.param(["10.245.7.0/24"], 7, "10.245.8.0/24", id="taken-next"),
        pytest.param(["10.245.0.0/16"], 7, None, id="pool-taken"),
        pytest.param(["10.245.255.0/24"], 255, "10.245.1.0/24", id="wraps-skips-network-0"),
        pytest.param(["10.0.0.0/8"], 3, None, id="covered-by-wider"),
    ],
)
def test_first_free_subnet(used: list[str], start: int, expected: str | None) -> None:
    networks = [ipaddress.IPv4Network(n) for n in used]

    found = nodeconfig.first_free_subnet(networks, start=start)

    assert (str(found) if found else None) == expected


def test_containerd_config_keeps_everything_in_the_nodes_paths(tmp_path: Path) -> None:
    layout = NodeLayout.of(tmp_path)

    config = tomllib.loads(nodeconfig.containerd_config(layout, sandbox_image="p:1"))

    assert config["root"] == str(layout.containerd_root)
    assert config["state"] == str(layout.containerd_state)
    assert config["grpc"]["address"] == str(layout.containerd_socket)
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["restrict_oom_score_adj"] is True
    assert cri["disable_apparmor"] is True
    assert cri["netns_mounts_under_state_dir"] is True
    assert cri["sandbox_image"] == "p:1"
    assert cri["registry"]["config_path"] == str(layout.registry_config)
    assert cri["cni"]["conf_dir"] == str(layout.cni_config_dir)
    runc = cri["containerd"]["runtimes"]["runc"]
    assert runc["options"]["SystemdCgroup"] is False
    assert runc["options"]["Root"].startswith(str(layout.run_dir))
    assert config["plugins"]["io.containerd.internal.v1.opt"]["path"].startswith(str(tmp_path))


def test_registry_hosts_serve_docker_io_from_the_local_registry_only() -> None:
    hosts = {name: tomllib.loads(body) for name, body in nodeconfig.registry_hosts(5001).items()}

    assert set(hosts) == {"127.0.0.1:5001", "localhost:5001", "docker.io"}
    for host in hosts.values():
        assert host["server"] == "http://127.0.0.1:5001"
        assert host["host"]["http://127.0.0.1:5001"]["capabilities"] == ["pull", "resolve"]


def test_cni_config_bridges_the_subnet_without_forwarding(tmp_path: Path) -> None:
    layout = NodeLayout.of(tmp_path)
    subnet = ipaddress.IPv4Network("10.245.9.0/24")

    (plugin,) = json.loads(nodeconfig.cni_config(layout, subnet))["plugins"]

    assert plugin["bridge"] == layout.bridge
    assert plugin["isGateway"] is False and plugin["ipMasq"] is False
    assert plugin["ipam"]["routes"] == [{"dst": "0.0.0.0/0", "gw": "10.245.9.1"}]
    assert plugin["ipam"]["dataDir"] == str(layout.ipam_dir)


def test_kubelet_config_taints_the_node_and_leaves_iptables_alone(tmp_path: Path) -> None:
    layout = NodeLayout.of(tmp_path)

    config = yaml.safe_load(
        nodeconfig.kubelet_config(layout, node_ip="10.245.9.1", port=4000, healthz_port=4001)
    )

    assert config["registerWithTaints"] == [nodeconfig.NODE_TAINT]
    assert config["makeIPTablesUtilChains"] is False
    assert config["address"] == "10.245.9.1"
    assert config["cgroupRoot"] == layout.cgroup_root
    assert config["containerRuntimeEndpoint"] == f"unix://{layout.containerd_socket}"
    assert config["failCgroupV1"] is False


def test_shim_socket_is_where_containerd_puts_it() -> None:
    socket = sweep.shim_socket(Path("/run/x/containerd.sock"), "k8s.io", "abc")

    expected = hashlib.sha256(b"/run/x/containerd.sock/k8s.io/abc").hexdigest()
    assert socket == Path("/run/containerd/s") / expected


def test_missing_requirements_name_the_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine, "_found", lambda path: not path.endswith(("runc", "bridge")))
    monkeypatch.setattr(machine.os, "geteuid", lambda: 1000)

    problems = machine.missing_requirements()

    assert problems[0].endswith("run as root")
    assert "apt-get install -y runc containernetworking-plugins" in problems[1]


@pytest.mark.parametrize(
    ("baseline", "current", "expected"),
    [
        pytest.param(
            {"kernel.panic": "1"},
            {"kernel.panic": "10"},
            {"kernel.panic": ("10", "1")},
            id="kubelet-changed",
        ),
        pytest.param({"kernel.panic": "1"}, {"kernel.panic": "1"}, {}, id="unchanged"),
        pytest.param(
            {"net.ipv4.ip_forward": "1"},
            {"net.ipv4.ip_forward": "0"},
            {},
            id="someone-else-turned-it-off",
        ),
        pytest.param({"kernel.panic": "1"}, {"kernel.panic": "5"}, {}, id="someone-else-set-it"),
        pytest.param({"kernel.panic": "1"}, {}, {}, id="not-readable-now"),
    ],
)
def test_settings_to_restore(
    baseline: dict[str, str], current: dict[str, str], expected: dict[str, tuple[str, str]]
) -> None:
    assert machine.settings_to_restore(baseline, current) == expected


def test_registry_hosts_with_tls_trust_the_given_ca() -> None:
    hosts = nodeconfig.registry_hosts(5001, ca_file="/x/ca.crt")

    body = tomllib.loads(hosts["docker.io"])
    assert body["server"] == "https://127.0.0.1:5001"
    assert body["host"]["https://127.0.0.1:5001"]["ca"] == "/x/ca.crt"


def test_the_node_uses_the_registry_the_cluster_recorded(tmp_path: Path) -> None:
    (tmp_path / "registry.json").write_text(
        json.dumps({"host": "127.0.0.1", "port": 5123, "tls": False, "ca_file": None})
    )

    assert realnode._recorded_registry(tmp_path) == (5123, None)
    assert realnode._recorded_registry(tmp_path / "none") is None


def test_up_with_a_real_node_says_what_is_missing_before_starting_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.devtools.cluster.local import LocalCluster
    from runner.errors import ClusterError

    monkeypatch.setattr(machine, "_found", lambda path: path != "catatonit")
    cluster = LocalCluster(tmp_path / "cluster")

    with pytest.raises(ClusterError) as raised:
        cluster.up(real_node=True, progress=lambda _message: None)

    assert "cannot run a real node" in str(raised.value)
    assert "apt-get install -y catatonit" in str(raised.value)
    assert not (tmp_path / "cluster").exists()

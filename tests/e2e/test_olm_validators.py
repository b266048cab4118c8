"""Our bundles and catalogs against the real OLM tools, built from Go modules
(runner/devtools/gomodules/tools: operator-sdk for `bundle validate`, opm for `validate`,
`render`, `serve`).

The sample operator's bundles v0.1.0 and v0.2.0 (which replaces v0.1.0) must pass both
validators; a two-version catalog must pass `opm validate` and be served by `opm serve`
with the upgrade edge and the manifests; every broken bundle must fail our validator and,
where operator-sdk's default suite catches it, operator-sdk too.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from support.bundles import REPO, edit_yaml

from runner.cli.main import main
from runner.devtools.cluster.processes import free_port
from runner.devtools.packaging import olmnames as olm
from runner.devtools.packaging.loader import load_bundle
from runner.devtools.packaging.validate import validate_bundle
from runner.errors import ClusterError

pytestmark = pytest.mark.timeout(1800)  # a cold build of both tools takes ~10 minutes

PACKAGE = "memcached-operator"
CSV = f"manifests/{PACKAGE}.clusterserviceversion.yaml"
CRD = "manifests/cache.example.com_memcacheds.yaml"


@pytest.fixture(scope="module")
def tools() -> dict[str, Path]:
    from runner.devtools.cluster import build
    from runner.devtools.cluster.components import tools as tool_components

    wanted = tool_components()
    if build.missing(wanted.values(), build.cache_root()):
        try:
            build.check_go(c.module for c in wanted.values())
        except ClusterError as exc:  # no Go, or too old: the only reason to skip
            pytest.skip(f"cannot build operator-sdk and opm from Go modules: {exc}")
    return build.ensure_built(wanted.values(), root=build.cache_root())


def _generate(root: Path, version: str, *extra: str) -> Path:
    output = root / "bundle"
    image = f"example.com/memcached-operator:v{version}"
    argv = ["bundle", "generate", "--version", version, "--image", image]
    argv += ["--project-dir", str(REPO), "--output-dir", str(output), *extra]
    assert main(argv) == 0
    return output


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bundles")
    return {
        "0.1.0": _generate(root / "v0.1.0", "0.1.0"),
        "0.2.0": _generate(root / "v0.2.0", "0.2.0", "--replaces", f"{PACKAGE}.v0.1.0"),
    }


def sdk_validate(tools: dict[str, Path], bundle: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tools["operator-sdk"]), "bundle", "validate", "./" + bundle.name],
        cwd=bundle.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("version", ["0.1.0", "0.2.0"])
def test_both_validators_accept_the_sample_bundles(
    tools: dict[str, Path], bundles: dict[str, Path], version: str
) -> None:
    bundle = bundles[version]
    errors = [f for f in validate_bundle(bundle, project=REPO) if f.level == "error"]
    assert errors == []
    result = sdk_validate(tools, bundle)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All validation tests have completed successfully" in result.stderr + result.stdout


@pytest.fixture(scope="module")
def catalog_dir(bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("catalog") / "catalog"
    assert (
        main(["catalog", "generate", "--bundle", str(bundles["0.1.0"]), "--output", str(output)])
        == 0
    )
    argv = ["catalog", "generate", "--bundle", str(bundles["0.2.0"]), "--from", str(output)]
    assert main([*argv, "--output", str(output)]) == 0
    return output


def test_opm_validates_the_two_version_catalog(tools: dict[str, Path], catalog_dir: Path) -> None:
    result = subprocess.run(
        [str(tools["opm"]), "validate", str(catalog_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    documents = list(yaml.safe_load_all((catalog_dir / PACKAGE / "index.yaml").read_text()))
    (channel,) = [d for d in documents if d["schema"] == "olm.channel"]
    assert channel["entries"][-1] == {"name": f"{PACKAGE}.v0.2.0", "replaces": f"{PACKAGE}.v0.1.0"}


def test_opm_validate_rejects_a_broken_catalog(
    tools: dict[str, Path], catalog_dir: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "catalog"
    shutil.copytree(catalog_dir, broken)
    index = broken / PACKAGE / "index.yaml"
    index.write_text(index.read_text().replace("defaultChannel: alpha", "defaultChannel: stable"))
    result = subprocess.run(
        [str(tools["opm"]), "validate", str(broken)], capture_output=True, text=True
    )
    assert result.returncode != 0


def _properties(bundle: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    objects = sorted(
        json.dumps(json.loads(base64.b64decode(p["value"]["data"])), sort_keys=True)
        for p in bundle["properties"]
        if p["type"] == "olm.bundle.object"
    )
    others = [p for p in bundle["properties"] if p["type"] != "olm.bundle.object"]
    return others, objects


def test_our_bundle_document_matches_opm_render(
    tools: dict[str, Path], bundles: dict[str, Path], catalog_dir: Path
) -> None:
    """`opm render <bundle dir>` is what opm itself would put in a catalog."""
    result = subprocess.run(
        [str(tools["opm"]), "render", str(bundles["0.1.0"]), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    theirs = json.loads(result.stdout)
    documents = yaml.safe_load_all((catalog_dir / PACKAGE / "index.yaml").read_text())
    ours = next(
        d for d in documents if d.get("name") == f"{PACKAGE}.v0.1.0" and d["schema"] == "olm.bundle"
    )
    assert (ours["name"], ours["package"]) == (theirs["name"], theirs["package"])
    assert _properties(ours) == _properties(theirs)


@pytest.fixture
def served(tools: dict[str, Path], catalog_dir: Path, tmp_path: Path) -> Iterator[int]:
    port, pprof = free_port(), free_port()
    log = (tmp_path / "opm-serve.log").open("w")
    process = subprocess.Popen(
        [str(tools["opm"]), "serve", str(catalog_dir), "--port", str(port),
         "--pprof-addr", f"127.0.0.1:{pprof}", "--cache-dir", str(tmp_path / "cache"),
         "--cache-enforce-integrity=false", "--termination-log", str(tmp_path / "termination-log")],
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while "serving registry" not in (tmp_path / "opm-serve.log").read_text():
            assert process.poll() is None, (tmp_path / "opm-serve.log").read_text()
            assert time.monotonic() < deadline, "opm serve did not start within 60 s"
            time.sleep(0.2)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


class _Registry:
    """opm's `api.Registry` gRPC service, its messages as the server describes them (opm
    serves gRPC reflection, as OLM's own tools use it)."""

    def __init__(self, channel: grpc.Channel) -> None:
        self._channel = channel
        pool = descriptor_pool.DescriptorPool(ProtoReflectionDescriptorDatabase(channel))
        self._service = pool.FindServiceByName("api.Registry")

    def call(self, method: str, **fields: str) -> list[Any]:
        """The response messages of `method` called with a request of `fields`."""
        described = self._service.FindMethodByName(method)
        request: Message = message_factory.GetMessageClass(described.input_type)(**fields)
        response = message_factory.GetMessageClass(described.output_type)
        path = f"/{self._service.full_name}/{method}"
        if described.server_streaming:
            stream = self._channel.unary_stream(
                path,
                request_serializer=type(request).SerializeToString,
                response_deserializer=response.FromString,
            )
            return list(stream(request, timeout=10))
        unary = self._channel.unary_unary(
            path,
            request_serializer=type(request).SerializeToString,
            response_deserializer=response.FromString,
        )
        return [unary(request, timeout=10)]


def test_opm_serve_answers(served: int, bundles: dict[str, Path]) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{served}") as channel:
        health = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=10
        )
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        registry = _Registry(channel)
        assert [package.name for package in registry.call("ListPackages")] == [PACKAGE]
        (entry,) = registry.call("GetChannelEntriesThatReplace", csvName=f"{PACKAGE}.v0.1.0")
        assert entry.bundleName == f"{PACKAGE}.v0.2.0"
        assert entry.replaces == f"{PACKAGE}.v0.1.0"
        (bundle,) = registry.call(
            "GetBundle", pkgName=PACKAGE, channelName="alpha", csvName=f"{PACKAGE}.v0.2.0"
        )
    csv = json.loads(bundle.csvJson)  # served from olm.bundle.object
    assert csv["metadata"]["name"] == f"{PACKAGE}.v0.2.0"
    served_kinds = sorted(json.loads(obj)["kind"] for obj in bundle.object)
    expected = sorted(obj["kind"] for _, obj in load_bundle(bundles["0.2.0"]).objects())
    assert served_kinds == expected


# Broken bundles, each rejected by our validator. operator-sdk's default suite (v1.42.3)
# rejects those marked True and accepts the five marked False, which we reject on
# purpose: a CSV without spec.version (OLM cannot order it in a channel), bundle.Dockerfile
# labels that disagree with annotations.yaml (the image carries the labels; operator-sdk
# never reads the Dockerfile), an install mode type left out (OLM then treats it as
# unsupported, silently), a default channel that is not one of the channels (opm refuses
# the catalog later), and a :latest operator image (an upgrade would not roll the pods).
Break = Callable[[Path], None]


def _csv(change: Callable[[dict[str, Any]], None]) -> Break:
    return lambda bundle: edit_yaml(bundle / CSV, change)


def _annotation(key: str, value: str | None) -> Break:
    def change(data: dict[str, Any]) -> None:
        if value is None:
            data["annotations"].pop(key)
        else:
            data["annotations"][key] = value

    return lambda bundle: edit_yaml(bundle / "metadata" / "annotations.yaml", change)


def _container_image(image: str) -> Break:
    def change(csv: dict[str, Any]) -> None:
        spec = csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]
        spec["containers"][0]["image"] = image

    return _csv(change)


def _dockerfile_channel(bundle: Path) -> None:
    path = bundle.parent / "bundle.Dockerfile"
    path.write_text(path.read_text().replace("channels.v1=alpha", "channels.v1=beta"))


def _service_account(bundle: Path) -> None:
    sa = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": f"{PACKAGE}-controller-manager"},
    }
    (bundle / "manifests" / "sa.yaml").write_text(yaml.safe_dump(sa))


def _annotate(key: str, value: str) -> Break:
    return _csv(lambda d: d["metadata"]["annotations"].__setitem__(key, value))


def _spec(key: str, value: Any = None) -> Break:
    def change(csv: dict[str, Any]) -> None:
        if value is None:
            csv["spec"].pop(key)
        else:
            csv["spec"][key] = value

    return _csv(change)


def _owned(key: str, value: Any) -> Break:
    return _csv(
        lambda d: d["spec"]["customresourcedefinitions"]["owned"][0].__setitem__(key, value)
    )


def _no_mode_supported(csv: dict[str, Any]) -> None:
    for mode in csv["spec"]["installModes"]:
        mode["supported"] = False


NOT_OWNED = '[{"apiVersion": "x.io/v1", "kind": "X"}]'
BROKEN = [
    pytest.param(_spec("version"), False, id="missing-csv-version"),
    pytest.param(lambda b: (b / CRD).unlink(), True, id="owned-crd-missing"),
    pytest.param(_annotate("alm-examples", "[{"), True, id="bad-alm-examples-json"),
    pytest.param(_annotate("alm-examples", NOT_OWNED), True, id="alm-example-not-owned"),
    pytest.param(_dockerfile_channel, False, id="annotations-differ-from-dockerfile"),
    pytest.param(_spec("installModes"), True, id="missing-install-modes"),
    pytest.param(_csv(_no_mode_supported), True, id="no-install-mode-supported"),
    pytest.param(_csv(lambda d: d["spec"]["installModes"].pop(0)), False, id="mode-missing"),
    pytest.param(_annotation(olm.PACKAGE, None), True, id="annotations-without-package"),
    pytest.param(_annotation(olm.MEDIATYPE, "plain+v0"), True, id="wrong-mediatype"),
    pytest.param(_annotation(olm.DEFAULT_CHANNEL, "stable"), False, id="default-not-a-channel"),
    pytest.param(_spec("customresourcedefinitions", {"owned": []}), True, id="crd-not-owned"),
    pytest.param(_owned("version", "v9"), True, id="owned-version-not-served"),
    pytest.param(_csv(lambda d: d["metadata"].update(name="Bad_Name.v0.1.0")), True, id="csv-name"),
    pytest.param(_spec("displayName"), True, id="missing-display-name"),
    pytest.param(_spec("minKubeVersion", "1.25"), True, id="invalid-min-kube-version"),
    pytest.param(_annotate("olm.skiprange", ">=0.0.1"), True, id="annotation-wrong-case"),
    pytest.param(_service_account, True, id="service-account-clashes-with-csv"),
    pytest.param(_container_image("example.com/memcached:latest"), False, id="latest-image"),
    pytest.param(lambda b: (b / CSV).unlink(), True, id="no-csv"),
]  # fmt: skip


@pytest.mark.parametrize(("breaks", "sdk_rejects"), BROKEN)
def test_broken_bundles_are_rejected(
    tools: dict[str, Path],
    bundles: dict[str, Path],
    tmp_path: Path,
    breaks: Break,
    sdk_rejects: bool,
) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(bundles["0.1.0"], bundle)
    shutil.copy(bundles["0.1.0"].parent / "bundle.Dockerfile", tmp_path / "bundle.Dockerfile")
    breaks(bundle)
    ours = [f for f in validate_bundle(bundle, project=REPO) if f.level == "error"]
    assert ours, "our validator accepted a broken bundle"
    if sdk_rejects:
        result = sdk_validate(tools, bundle)
        assert result.returncode != 0, result.stdout + result.stderr

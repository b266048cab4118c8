"""What the local control plane is built from: one Go wrapper module per source module.

The wrapper modules (package data: `runner/devtools/gomodules/cluster/<module>/` and
`.../tools/<module>/`, found by `gomoduledirs`) pin each version in their `go.mod` (the
only place versions are written); this module reads them back so the build cache and
`--version` flags always agree with what `go build` compiles.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from runner.devtools.cluster.gomoduledirs import cluster_dir, tools_dir
from runner.errors import ClusterError


@dataclass(frozen=True)
class GoModule:
    """A wrapper module (a directory of `gomodules`) and the source module it pins."""

    directory: Path
    source_module: str

    @property
    def version(self) -> str:
        return read_required_version(self.directory / "go.mod", self.source_module)


@dataclass(frozen=True)
class SourceEdit:
    """A build-time change to one file of a module the wrapper requires.

    The build copies that module out of the module cache (which stays untouched),
    applies the edits to the copy and builds with a temporary go.mod that replaces the
    module by the copy (see `build.write_edited_modules`). With `source`, the file
    `path` is added (or replaced) with our own file; otherwise the module's file gets
    `old` replaced by `new`, and `old` must occur exactly once, so that a version bump
    that moves the code fails the build instead of skipping the edit.
    """

    module: str
    path: str
    old: str = ""
    new: str = ""
    source: Path | None = None


@dataclass(frozen=True)
class Component:
    """One binary of the control plane."""

    name: str
    module: GoModule
    package: str
    ldflags: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    edits: tuple[SourceEdit, ...] = ()
    # Files of ours the build reads besides the wrapper's go.mod/go.sum (a stand-in
    # module the wrapper replaces a dependency with): their content keys the cache.
    inputs: tuple[Path, ...] = ()

    @property
    def version(self) -> str:
        return self.module.version


_REQUIRE_LINE = re.compile(r"^\s*(?:require\s+)?(?P<path>\S+)\s+(?P<version>v\S+)\s*(?://.*)?$")


def read_required_version(go_mod: Path, module_path: str) -> str:
    """Return the version `go_mod` requires of `module_path`."""
    try:
        text = go_mod.read_text(encoding="utf-8")
    except OSError as exc:
        raise ClusterError(f"{go_mod}: cannot read the wrapper module: {exc}") from exc
    for line in text.splitlines():
        match = _REQUIRE_LINE.match(line)
        if match and match["path"] == module_path:
            return match["version"]
    raise ClusterError(f"{go_mod}: no `require {module_path} vX.Y.Z` line")


def kubernetes_ldflags(version: str) -> tuple[str, ...]:
    """Stamp the version into k8s binaries, or /version reports v0.0.0."""
    major, minor = version.lstrip("v").split(".")[:2]
    prefix = "k8s.io/component-base/version"
    return (
        f"-X {prefix}.gitVersion={version}",
        f"-X {prefix}.gitMajor={major}",
        f"-X {prefix}.gitMinor={minor}",
        f"-X {prefix}.gitTreeState=clean",
    )


def components(root: Path | None = None) -> dict[str, Component]:
    """Every binary of the control plane, by name, in start order."""
    base = root or cluster_dir()
    kubernetes = GoModule(base / "kubernetes", "k8s.io/kubernetes")
    etcd = GoModule(base / "etcd", "go.etcd.io/etcd/server/v3")
    kwok = GoModule(base / "kwok", "sigs.k8s.io/kwok")
    k8s_flags = kubernetes_ldflags(kubernetes.version)
    k8s_cmds = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
    result = {"etcd": Component("etcd", etcd, "go.etcd.io/etcd/server/v3")}
    for name in k8s_cmds:
        result[name] = Component(name, kubernetes, f"k8s.io/kubernetes/cmd/{name}", k8s_flags)
    result["kwok"] = Component("kwok", kwok, "sigs.k8s.io/kwok/cmd/kwok")
    return result


def registry(root: Path | None = None) -> Component:
    """CNCF Distribution's `registry`, which `cluster up --registry` serves on loopback
    (images are pushed there and pulled by the node's container runtime)."""
    base = root or cluster_dir()
    distribution = GoModule(base / "registry", "github.com/distribution/distribution/v3")
    stamp = f"-X {distribution.source_module}/version.version={distribution.version}"
    return Component(
        "registry", distribution, f"{distribution.source_module}/cmd/registry", (stamp,)
    )


def kubelet(root: Path | None = None) -> Component:
    """The real node's kubelet: from the control plane's module, so its version always
    matches the API server's. Not one of `components()`: only `up --real-node` needs it."""
    kubernetes = GoModule((root or cluster_dir()) / "kubernetes", "k8s.io/kubernetes")
    return Component(
        "kubelet",
        kubernetes,
        "k8s.io/kubernetes/cmd/kubelet",
        kubernetes_ldflags(kubernetes.version),
    )


def tools(root: Path | None = None) -> dict[str, Component]:
    """The real OLM tools the tests check bundles and catalogs with (not part of `up`)."""
    base = root or tools_dir()
    sdk = GoModule(base / "operator-sdk", "github.com/operator-framework/operator-sdk")
    registry = GoModule(base / "opm", "github.com/operator-framework/operator-registry")
    sdk_version = f"{sdk.source_module}/internal/version"
    opm_version = f"{registry.source_module}/cmd/opm/version"
    return {
        "operator-sdk": Component(
            "operator-sdk",
            sdk,
            f"{sdk.source_module}/cmd/operator-sdk",
            (
                f"-X {sdk_version}.Version={sdk.version}",
                f"-X {sdk_version}.GitVersion={sdk.version}",
            ),
            ("containers_image_openpgp",),
        ),
        "opm": Component(
            "opm",
            registry,
            f"{registry.source_module}/cmd/opm",
            (f"-X {opm_version}.opmVersion={registry.version}",),
            ("containers_image_openpgp", "json1"),
            opm_edits(registry, base),
        ),
    }


def opm_edits(registry: GoModule, base: Path) -> tuple[SourceEdit, ...]:
    """`opm serve` listens on ":<port>", every interface (no flag for the host): the edit
    makes $OPM_SERVE_HOST (e.g. 127.0.0.1) choose the host; unset, nothing changes."""
    serve = "cmd/opm/serve"
    return (
        SourceEdit(
            registry.source_module,
            f"{serve}/serve.go",
            old='lis, err := net.Listen("tcp", ":"+s.port)',
            new='lis, err := net.Listen("tcp", serveHost()+":"+s.port)',
        ),
        SourceEdit(
            registry.source_module,
            f"{serve}/zz_serve_host.go",
            source=base / "opm" / "added" / "serve_host.go",
        ),
    )


def go_ansible_operator(root: Path | None = None) -> Component:
    """The Go ansible-operator (operator-sdk's), which bench/compare measures ours against
    and the differential suite (tests/differential) compares ours with.

    Not one of `tools()` (`cluster tools` does not build it); `cluster up --build-only`
    (`make binaries`) does, for the tests.
    """
    base = root or tools_dir()
    plugins = GoModule(
        base / "ansible-operator-go", "github.com/operator-framework/ansible-operator-plugins"
    )
    version = f"{plugins.source_module}/internal/version"
    return Component(
        "ansible-operator-go",
        plugins,
        f"{plugins.source_module}/cmd/ansible-operator",
        (f"-X {version}.Version={plugins.version}", f"-X {version}.GitVersion={plugins.version}"),
    )


OLM_API_MODULE = "github.com/operator-framework/api"
OLM_V1_MODULE = "github.com/operator-framework/operator-controller"


def olm_operators(root: Path | None = None) -> dict[str, Component]:
    """OLM's `olm` and `catalog` operators, which `ansible-operator olm install` runs.

    Not one of `tools()` nor of the control plane: only OLM users need them. Both come
    from one wrapper module, which also pins the operator-framework/api module whose
    `crds/` directory holds OLM's CustomResourceDefinitions (copied next to the `olm`
    binary at build time, see `build.olm_crd_dir`).
    """
    base = root or tools_dir()
    lifecycle = GoModule(base / "olm", "github.com/operator-framework/operator-lifecycle-manager")
    version = f"{lifecycle.source_module}/pkg/version"
    ldflags = (f"-X {version}.OLMVersion={lifecycle.version}",)
    # Both operators serve /healthz and /metrics on the fixed address ":8080" (no flag);
    # the edit makes $OLM_LISTEN_ADDRESS choose it, so each gets its own loopback port.
    server = "pkg/lib/server"
    edits = (
        SourceEdit(
            lifecycle.source_module,
            f"{server}/server.go",
            old="Addr:    sc.getAddress(tlsEnabled),",
            new="Addr:    listenAddress(sc.getAddress(tlsEnabled)),",
        ),
        SourceEdit(
            lifecycle.source_module,
            f"{server}/zz_listen_address.go",
            source=base / "olm" / "added" / "listen_address.go",
        ),
    )
    return {
        name: Component(
            name, lifecycle, f"{lifecycle.source_module}/cmd/{name}", ldflags, (), edits
        )
        for name in ("olm", "catalog")
    }


def olm_utilities(root: Path | None = None) -> dict[str, Component]:
    """The programs of OLM's helper images, from the same module as `olm_operators()`.

    The catalog operator unpacks bundle images with Jobs whose init container copies
    `/bin/cpb` out of its `--util-image` (`util/cpb`), and a CatalogSource with
    `grpcPodConfig.extractContent` copies `/bin/copy-content` (`cmd/copy-content`); every
    catalog registry pod is probed with `grpc_health_probe`, which is not part of OLM:
    our own small client of gRPC's health service is added to the module copy as
    `cmd/grpc_health_probe` (its cache directory carries the digest of that source).
    """
    base = root or tools_dir()
    lifecycle = GoModule(base / "olm", "github.com/operator-framework/operator-lifecycle-manager")
    probe = (
        SourceEdit(
            lifecycle.source_module,
            "cmd/grpc_health_probe/main.go",
            source=base / "olm" / "added" / "grpc_health_probe.go",
        ),
    )
    packages = {
        "cpb": "util/cpb",
        "copy-content": "cmd/copy-content",
        "grpc_health_probe": "cmd/grpc_health_probe",
    }
    return {
        name: Component(name, lifecycle, f"{lifecycle.source_module}/{path}", (), (), probe)
        for name, path in packages.items()
    }


def olm_v1_operators(root: Path | None = None) -> dict[str, Component]:
    """OLM v1's `operator-controller` and `catalogd`, which `olm install --v1` runs.

    Both come from one module (github.com/operator-framework/operator-controller), built
    from the wrapper `gomodules/tools/olm-v1`, whose `boxcutter-stub/` stands in for a
    dependency the module proxy does not serve (its files key the cache). Their CRDs are
    copied from the module beside `operator-controller` at build time
    (`build.olm_v1_crd_dir`). Two edits, each a no-op unless its variable is set, let
    them run outside a pod: the service-account token file both read their own name from
    (`$OLMV1_SERVICE_ACCOUNT_TOKEN_FILE`), and the host of catalogd's webhook server,
    which has only a port flag (`$CATALOGD_WEBHOOK_HOST`).
    """
    base = root or tools_dir()
    controller = GoModule(base / "olm-v1", OLM_V1_MODULE)
    added = base / "olm-v1" / "added"
    edits = (
        SourceEdit(
            OLM_V1_MODULE,
            "internal/shared/util/sa/serviceaccount.go",
            old='os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/token")',
            new="os.ReadFile(serviceAccountTokenFile())",
        ),
        SourceEdit(
            OLM_V1_MODULE,
            "internal/shared/util/sa/zz_token_file.go",
            source=added / "service_account_token.go",
        ),
        SourceEdit(
            OLM_V1_MODULE,
            "cmd/catalogd/main.go",
            old="Port: cfg.webhookPort,",
            new="Host: webhookHost(),\n\t\tPort: cfg.webhookPort,",
        ),
        SourceEdit(
            OLM_V1_MODULE, "cmd/catalogd/zz_webhook_host.go", source=added / "webhook_host.go"
        ),
    )
    stub = base / "olm-v1" / "boxcutter-stub"
    inputs = tuple(sorted(p for p in stub.rglob("*") if p.is_file()))
    ldflags = (f"-X {OLM_V1_MODULE}/internal/shared/version.version={controller.version}",)
    return {
        name: Component(
            name,
            controller,
            f"{OLM_V1_MODULE}/cmd/{name}",
            ldflags,
            ("containers_image_openpgp",),
            edits,
            inputs,
        )
        for name in ("operator-controller", "catalogd")
    }

"""Build the control-plane binaries from Go modules once, then reuse them.

Binaries live in `<cache>/bin/<component>-<version>/<component>`; the cache root is
`$ANSIBLE_OPERATOR_CACHE` or `~/.cache/ansible-operator`. Builds go through the Go module
proxy and the wrapper modules' committed go.sum files, one `go build` per wrapper module.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TextIO

from runner.devtools.cluster.components import OLM_API_MODULE, Component, GoModule, SourceEdit
from runner.errors import ClusterError
from runner.util.progress import Ticker

Progress = Callable[[str], None]

# Cold-build times measured on 2 cores, from idle to heavily loaded (other builds and
# tests running), printed so nobody thinks the build hung; the progress bar shows the rest.
_COLD_BUILD_HINT = {
    "k8s.io/kubernetes": "7 to 13 minutes (measured: 398 s idle, 755 s busy)",
    "go.etcd.io/etcd/server/v3": "30 seconds to 1 minute",
    "sigs.k8s.io/kwok": "1 to 3 minutes (measured: 187 s busy)",
    "github.com/operator-framework/operator-sdk": "5 to 12 minutes (measured: 730 s busy)",
    "github.com/operator-framework/operator-registry": "4 to 10 minutes (measured: 563 s busy)",
    "github.com/operator-framework/ansible-operator-plugins": "2 to 5 minutes",
    "github.com/operator-framework/operator-lifecycle-manager": (
        "5 to 17 minutes (measured: 1005 s busy)"
    ),
    "github.com/distribution/distribution/v3": "1 to 2 minutes",
    "github.com/operator-framework/operator-controller": "4 to 10 minutes (measured: 555 s busy)",
}

# kwok refuses to start without Stage objects; these ship inside its module.
KWOK_STAGES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    configured = env.get("ANSIBLE_OPERATOR_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "ansible-operator"


def binary_path(component: Component, root: Path) -> Path:
    """`<root>/bin/<name>-<version>/<name>`; a component built with source edits gets
    `+<digest of the edits>` after the version, so changing an edit rebuilds it."""
    changed = component.edits or component.inputs
    suffix = f"+{edits_digest(component.edits, component.inputs)}" if changed else ""
    return root / "bin" / f"{component.name}-{component.version}{suffix}" / component.name


def edits_digest(edits: Iterable[SourceEdit], inputs: Iterable[Path] = ()) -> str:
    """A short digest of the edits, including the content of added files, and of the
    other input files (name and content)."""
    digest = hashlib.sha256()
    for edit in edits:
        digest.update(repr((edit.module, edit.path, edit.old, edit.new)).encode())
        if edit.source is not None:
            try:
                digest.update(edit.source.read_bytes())
            except OSError as exc:
                raise ClusterError(f"{edit.source}: cannot read the added source: {exc}") from exc
    for path in inputs:
        try:
            digest.update(f"{path.name}\0".encode() + path.read_bytes())
        except OSError as exc:
            raise ClusterError(f"{path}: cannot read this build input: {exc}") from exc
    return digest.hexdigest()[:10]


def kwok_stage_dir(component: Component, root: Path) -> Path:
    return binary_path(component, root).parent / "stages"


def olm_v1_crd_dir(component: Component, root: Path) -> Path:
    """Where OLM v1's CRDs (ClusterCatalog, ClusterExtension) sit beside its binary."""
    return binary_path(component, root).parent / "crds"


def olm_crd_dir(component: Component, root: Path) -> Path:
    """Where OLM's CRDs (from the operator-framework/api module) sit beside `olm`."""
    return binary_path(component, root).parent / "crds"


def _parse_go_version(text: str) -> tuple[int, ...]:
    match = re.search(r"go(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not match:
        raise ClusterError(f"cannot read the Go version from {text!r}")
    return tuple(int(part or 0) for part in match.groups())


def _required_go(module: GoModule) -> tuple[int, ...]:
    for line in (module.directory / "go.mod").read_text(encoding="utf-8").splitlines():
        if line.startswith("go "):
            return _parse_go_version("go" + line.split()[1])
    return (1, 0, 0)


def check_go(modules: Iterable[GoModule]) -> str:
    """Return the path of a Go toolchain new enough for every module, or fail early."""
    go = shutil.which("go")
    if go is None:
        raise ClusterError(
            "Go is not installed (no `go` on PATH); the local control plane is built from "
            "Go modules the first time. Install Go 1.26 or newer."
        )
    found_text = subprocess.run(
        [go, "env", "GOVERSION"], capture_output=True, text=True, check=False
    ).stdout.strip()
    found = _parse_go_version(found_text)
    for module in modules:
        needed = _required_go(module)
        if found < needed:
            raise ClusterError(
                f"{found_text} is too old: {module.directory / 'go.mod'} needs go "
                f"{'.'.join(map(str, needed))} or newer"
            )
    return go


def missing(components: Iterable[Component], root: Path) -> list[Component]:
    return [c for c in components if not binary_path(c, root).is_file()]


def ensure_built(
    components: Iterable[Component], *, root: Path, progress: Progress = print
) -> dict[str, Path]:
    """Build whatever is not cached yet; return every component's binary path."""
    wanted = list(components)
    todo = missing(wanted, root)
    if todo:
        # One `go build` per module and set of source edits (the edits apply to a group).
        groups: dict[tuple[GoModule, tuple[SourceEdit, ...]], list[Component]] = {}
        for component in todo:
            groups.setdefault((component.module, component.edits), []).append(component)
        go = check_go(module for module, _ in groups)
        for (module, _), group in groups.items():
            _build_module(go, module, group, root=root, progress=progress)
    return {c.name: binary_path(c, root) for c in wanted}


def _build_module(
    go: str, module: GoModule, group: list[Component], *, root: Path, progress: Progress
) -> None:
    names = ", ".join(c.name for c in group)
    log_dir = root / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    # One module builds several groups at different times (the control plane, later the
    # kubelet): a lone binary not named like its module gets its own log.
    stem = module.directory.name
    if len(group) == 1 and group[0].name != stem:
        stem += f"-{group[0].name}"
    log_path = log_dir / f"build-{stem}-{module.version}.log"
    hint = _COLD_BUILD_HINT.get(module.source_module, "a while")
    progress(
        f"building {names} {module.version} from {module.source_module} "
        f"(first time only; a cold build takes {hint}; log: {log_path})"
    )
    started = time.monotonic()
    # readonly: builds are verified against the committed go.mod and go.sum, never edit them.
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly -buildvcs=false"}
    ldflags = " ".join(("-s", "-w", *group[0].ldflags))
    with tempfile.TemporaryDirectory(prefix="build-", dir=root) as out:
        command = [go, "build", "-trimpath", "-ldflags", ldflags, "-o", out + "/"]
        if group[0].tags:
            command[2:2] = ["-tags", ",".join(group[0].tags)]
        if group[0].edits:
            modfile = write_edited_modules(go, module, group[0].edits, Path(out) / "edited")
            command[2:2] = [f"-modfile={modfile}"]
        command += [c.package for c in group]
        total = _count_packages(go, command, cwd=module.directory, env=env)
        command[2:2] = ["-v"]  # one line per package built: the progress
        with log_path.open("w", encoding="utf-8") as log:
            log.write(" ".join(command) + "\n")
            log.flush()
            returncode, _ = _run_counting(command, module.directory, env, log, names, total)
        if returncode != 0:
            tail = "".join(log_path.read_text(encoding="utf-8").splitlines(True)[-15:])
            raise ClusterError(
                f"building {names} failed (exit {returncode}); full log: {log_path}\n{tail}"
            )
        for component in group:
            target = binary_path(component, root)
            target.parent.mkdir(parents=True, exist_ok=True)
            built = Path(out) / go_binary_name(component.package)
            if component.name == "kwok":
                _copy_kwok_stages(go, module, kwok_stage_dir(component, root))
            if component.name == "olm":
                _copy_olm_crds(go, module, olm_crd_dir(component, root))
            if component.name == "operator-controller":
                _copy_olm_v1_crds(go, module, olm_v1_crd_dir(component, root))
            os.replace(built, target)
    progress(f"built {names} in {time.monotonic() - started:.0f} s")


_PACKAGE_LINE = re.compile(r"^[\w.~-]+(/[\w.~+-]+)*$")


def _count_packages(go: str, build: list[str], *, cwd: Path, env: Mapping[str, str]) -> int:
    """How many packages `build` (a `go build` command line) compiles at most, from
    `go list -deps` with the same flags; 0 when that fails (the bar then shows counts)."""
    flags, packages = [], []
    args = iter(build[2:])
    for arg in args:
        if arg in ("-ldflags", "-o"):
            next(args, None)
        elif arg.startswith("-"):
            flags.append(arg)
            if arg == "-tags":
                flags.append(next(args, ""))
        else:
            packages.append(arg)
    result = subprocess.run(
        [go, "list", "-deps", *flags, *packages],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
    )
    return len(result.stdout.split()) if result.returncode == 0 else 0


def _run_counting(
    command: list[str], cwd: Path, env: Mapping[str, str], log: TextIO, names: str, total: int
) -> tuple[int, int]:
    """Run `go build -v`, copying its output to `log` and showing packages built of
    `total` (packages already in Go's build cache are not printed, so a warm build may end
    short of the total); returns the exit code and the packages built."""
    built = 0

    def counts() -> tuple[int, int]:
        return built, total

    with Ticker(f"building {names}", counts=counts):
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert process.stdout is not None
        for line in process.stdout:
            log.write(line)
            if _PACKAGE_LINE.match(line.strip()):
                built += 1
        return process.wait(), built


def go_binary_name(package: str) -> str:
    """The file name `go build -o dir/` gives a main package (a /vN suffix is skipped)."""
    parts = package.split("/")
    if len(parts) > 1 and re.fullmatch(r"v\d+", parts[-1]):
        return parts[-2]
    return parts[-1]


def _module_dir(go: str, module: GoModule, module_path: str) -> Path:
    """Where the module cache holds `module_path` at the version `module` requires,
    downloading it first on a machine whose module cache does not have it yet (`go list`
    names no directory for a module that is not downloaded)."""
    source = _go_output(go, module, ["list", "-m", "-f", "{{.Dir}}", module_path])
    if not source:
        downloaded = _go_output(go, module, ["mod", "download", "-json", module_path])
        try:
            source = str(json.loads(downloaded).get("Dir") or "")
        except ValueError:
            source = ""
    if not source:
        raise ClusterError(
            f"cannot find the source of {module_path} in the module cache, "
            f"nor download it (go mod download {module_path} in {module.directory})"
        )
    return Path(source)


def _go_output(go: str, module: GoModule, arguments: list[str]) -> str:
    return subprocess.run(
        [go, *arguments],
        cwd=module.directory,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()


def edited_text(text: str, edit: SourceEdit, *, where: str) -> str:
    """`text` with `edit.old` replaced by `edit.new`; `old` must occur exactly once."""
    count = text.count(edit.old)
    if count != 1:
        raise ClusterError(
            f"{where}: expected exactly one {edit.old!r} to edit, found {count}; "
            "the pinned version moved the code, update the edit in components.py"
        )
    return text.replace(edit.old, edit.new)


def write_edited_modules(
    go: str, module: GoModule, edits: Iterable[SourceEdit], work: Path
) -> Path:
    """Copy each module that `edits` change out of the module cache into `work/src`,
    apply the edits there, and write `work/go.mod` (the wrapper's go.mod plus a
    `replace` of each such module by its copy) and `work/go.sum` (the wrapper's);
    return that go.mod for `go build -modfile`. (`go build -overlay` refuses files in
    the module cache.) The copies have the same go.mod, so the dependency graph and its
    verification against the committed go.sum stay as they are."""
    by_module: dict[str, list[SourceEdit]] = {}
    for edit in edits:
        by_module.setdefault(edit.module, []).append(edit)
    replaces = []
    for module_path, group in by_module.items():
        copy = work / "src" / re.sub(r"[^A-Za-z0-9.-]", "_", module_path)
        shutil.copytree(_module_dir(go, module, module_path), copy)
        for path in [copy, *copy.rglob("*")]:  # the module cache is read-only
            path.chmod(path.stat().st_mode | 0o200)
        for edit in group:
            target = copy / edit.path
            if edit.source is not None:
                try:
                    target.parent.mkdir(parents=True, exist_ok=True)  # a new package
                    shutil.copyfile(edit.source, target)
                except OSError as exc:
                    raise ClusterError(f"{edit.source}: cannot add it: {exc}") from exc
                continue
            try:
                text = target.read_text(encoding="utf-8")
            except OSError as exc:
                raise ClusterError(f"{module_path}/{edit.path}: cannot read it: {exc}") from exc
            where = f"{module_path}/{edit.path}"
            target.write_text(edited_text(text, edit, where=where), encoding="utf-8")
        replaces.append(f"replace {module_path} => {copy}")
    modfile = work / "go.mod"
    original = without_replaces(
        (module.directory / "go.mod").read_text(encoding="utf-8"), set(by_module)
    )
    modfile.write_text(original.rstrip("\n") + "\n\n" + "\n".join(replaces) + "\n", "utf-8")
    if (module.directory / "go.sum").is_file():
        shutil.copyfile(module.directory / "go.sum", work / "go.sum")
    return modfile


def without_replaces(go_mod: str, modules: set[str]) -> str:
    """`go_mod` without the replace directives of `modules` (single or in a block)."""
    kept = []
    for line in go_mod.splitlines():
        body = line.strip().removeprefix("replace ").strip()
        words = body.split()
        if "=>" in words and words[0] in modules:
            continue
        kept.append(line)
    return "\n".join(kept) + "\n"


def _copy_kwok_stages(go: str, module: GoModule, target: Path) -> None:
    source = _module_dir(go, module, module.source_module)
    target.mkdir(parents=True, exist_ok=True)
    for stage in KWOK_STAGES:
        shutil.copyfile(source / stage, target / Path(stage).name)


# The "standard" (not experimental) CRDs, as OLM v1's release manifests install them.
OLM_V1_CRDS = (
    "helm/olmv1/base/catalogd/crd/standard/olm.operatorframework.io_clustercatalogs.yaml",
    "helm/olmv1/base/operator-controller/crd/standard/"
    "olm.operatorframework.io_clusterextensions.yaml",
)


def _copy_olm_v1_crds(go: str, module: GoModule, target: Path) -> None:
    source = _module_dir(go, module, module.source_module)
    target.mkdir(parents=True, exist_ok=True)
    for crd in OLM_V1_CRDS:
        shutil.copyfile(source / crd, target / Path(crd).name)


def _copy_olm_crds(go: str, module: GoModule, target: Path) -> None:
    source = _module_dir(go, module, OLM_API_MODULE) / "crds"
    target.mkdir(parents=True, exist_ok=True)
    crds = sorted(source.glob("operators.coreos.com_*.yaml"))
    if not crds:
        raise ClusterError(f"{source}: no OLM CRDs (operators.coreos.com_*.yaml) found")
    for crd in crds:
        shutil.copyfile(crd, target / crd.name)

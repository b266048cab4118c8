"""Container images built on this machine: the tool's configuration, a Debian base image
made without a registry, and the build command with the host's pip access.

Three container tools build the Dockerfiles: docker, podman and buildah (Debian
packages). podman and buildah read a containers.conf chosen by `$CONTAINERS_CONF`; the
one written here fits machines where the defaults fail (cgroup v1, a low file limit that
cannot be raised, no systemd). The base image is a Debian bookworm root file system made
by mmdebstrap from Debian's packages (python3, a venv at /opt/venv first on PATH, tini,
CA certificates), cached under the cache root keyed by its inputs.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from runner.errors import ClusterError
from runner.util.progress import Ticker

Progress = Callable[[str], None]
TOOLS = ("docker", "podman", "buildah")
# What the Dockerfile's `BASE_IMAGE` argument accepts to mean "the Debian base built here".
LOCAL_BASE = "local"
BASE_REPOSITORY = "localhost/ansible-operator-base"
BASE_SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "tini", "ca-certificates")
BASE_VENV = "/opt/venv"
BASE_ENV = (
    f"PATH={BASE_VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG=C.UTF-8",
)
DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEBIAN_SECURITY = "http://deb.debian.org/debian-security"
# podman's default limits for containers (files, processes) cannot be set where the hard
# limit is lower and CAP_SYS_RESOURCE is missing.
PODMAN_DEFAULT_NOFILE = 1048576
# The process limit is capped lower: sandboxed machines refuse more than 32768 even below
# the hard limit they report, and an operator's container needs far fewer.
CONTAINER_NPROC = 32768


@dataclass(frozen=True)
class MachineFacts:
    """What decides the containers.conf settings."""

    cgroup_v2: bool
    nofile_hard: int
    nproc_hard: int
    systemd: bool


def machine_facts() -> MachineFacts:
    _soft, nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    _soft, nproc = resource.getrlimit(resource.RLIMIT_NPROC)
    return MachineFacts(
        cgroup_v2=Path("/sys/fs/cgroup/cgroup.controllers").is_file(),
        nofile_hard=nofile if nofile != resource.RLIM_INFINITY else PODMAN_DEFAULT_NOFILE,
        nproc_hard=nproc if nproc != resource.RLIM_INFINITY else CONTAINER_NPROC,
        systemd=Path("/run/systemd/system").is_dir(),
    )


def containers_conf(facts: MachineFacts) -> str:
    """containers.conf for podman and buildah on a machine with these facts.

    crun refuses cgroup v1 in hybrid mode, so runc runs containers there; without systemd
    the cgroupfs manager and a file events log; the containers' file and process limits
    are at most the hard limits this process may set.
    """
    nofile = min(facts.nofile_hard, PODMAN_DEFAULT_NOFILE)
    nproc = min(facts.nproc_hard, CONTAINER_NPROC)
    lines = [
        "# Written by `ansible-operator image containers-conf` for this machine.",
        "[containers]",
        f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]',
        "",
        "[engine]",
        f'cgroup_manager = "{"systemd" if facts.systemd else "cgroupfs"}"',
        f'events_logger = "{"journald" if facts.systemd else "file"}"',
    ]
    if not facts.cgroup_v2:
        lines.append('runtime = "runc"')
    return "\n".join(lines) + "\n"


def write_containers_conf(cache: Path, facts: MachineFacts | None = None) -> Path:
    """Write (when changed) the machine's containers.conf under the cache; its path."""
    path = cache / "containers" / "containers.conf"
    text = containers_conf(facts or machine_facts())
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return path


def tool_environ(
    tool: str, cache: Path, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment to run `tool` with: ours containers.conf for podman and buildah
    unless `$CONTAINERS_CONF` already names one; BuildKit for docker (secret mounts)."""
    env = dict(os.environ if environ is None else environ)
    if tool in ("podman", "buildah") and not env.get("CONTAINERS_CONF"):
        env["CONTAINERS_CONF"] = str(write_containers_conf(cache))
    if tool == "docker":
        env.setdefault("DOCKER_BUILDKIT", "1")
    return env


def check_tool(tool: str) -> str:
    if tool not in TOOLS:
        raise ClusterError(f"CONTAINER_TOOL={tool}: use one of {', '.join(TOOLS)}")
    found = shutil.which(tool)
    if found is None:
        hint = "apt-get install -y podman buildah" if tool != "docker" else "install docker"
        raise ClusterError(f"{tool} is not installed ({hint})")
    return found


# -- pip inside the build: the host's configuration and CA bundle as build secrets --


@dataclass(frozen=True)
class PipAccess:
    """Files passed to the build as the secrets `pip.conf` and `pip-ca` (either may be
    missing: a machine that reaches PyPI directly needs neither)."""

    config: Path | None
    ca_bundle: Path | None

    def secrets(self) -> dict[str, Path]:
        found = {"pip.conf": self.config, "pip-ca": self.ca_bundle}
        return {name: path for name, path in found.items() if path is not None}


# pip's environment variables that say where packages come from; carried into pip.conf.
_PIP_SOURCE_ENV = {
    "PIP_INDEX_URL": "index-url",
    "PIP_EXTRA_INDEX_URL": "extra-index-url",
    "PIP_TRUSTED_HOST": "trusted-host",
    "PIP_DEFAULT_TIMEOUT": "timeout",
}


def pip_config_text(listed: str, environ: Mapping[str, str]) -> str:
    """A pip.conf from `pip config list` output (`section.key='value'` lines, the
    `:env:` ones left out) and pip's source variables; paths to local files (the CA
    bundle, find-links) are left out, they do not exist inside the build."""
    sections: dict[str, dict[str, str]] = {}
    for line in listed.splitlines():
        key, sep, value = line.partition("=")
        if not sep or key.startswith(":env:") or "." not in key:
            continue
        section, _, name = key.partition(".")
        if name in ("cert", "find-links", "client-cert"):
            continue
        sections.setdefault(section, {})[name] = value.strip().strip("'\"")
    for variable, name in _PIP_SOURCE_ENV.items():
        if environ.get(variable):
            sections.setdefault("global", {})[name] = environ[variable]
    return "".join(
        f"[{section}]\n" + "".join(f"{k} = {v}\n" for k, v in values.items())
        for section, values in sections.items()
    )


def pip_ca_bundle(listed: str, environ: Mapping[str, str]) -> Path | None:
    """The CA bundle the host's pip uses: `$PIP_CERT`, pip's `cert` setting, the usual
    variables, the system bundle."""
    candidates = [environ.get("PIP_CERT", "")]
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        if key.endswith(".cert"):
            candidates.append(value.strip().strip("'\""))
    candidates += [environ.get("REQUESTS_CA_BUNDLE", ""), environ.get("SSL_CERT_FILE", "")]
    candidates.append("/etc/ssl/certs/ca-certificates.crt")
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def host_pip_access(directory: Path, environ: Mapping[str, str] | None = None) -> PipAccess:
    """The host's pip access written as files under `directory` (the CA bundle is used
    where it is)."""
    env = os.environ if environ is None else environ
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    text = pip_config_text(listed, env)
    config = None
    if text:
        config = directory / "pip.conf"
        config.write_text(text, encoding="utf-8")
    return PipAccess(config, pip_ca_bundle(listed, env))


def build_argv(
    tool: str,
    *,
    tag: str,
    dockerfile: str,
    context: str,
    build_args: Mapping[str, str],
    secrets: Mapping[str, Path],
) -> list[str]:
    """The build command; podman and buildah build on the host network (no bridge is
    needed for a build) with runc-compatible isolation."""
    argv = [tool, "build"] if tool != "buildah" else [tool, "bud"]
    if tool in ("podman", "buildah"):
        argv += ["--network", "host"]
    argv += ["-f", dockerfile, "-t", tag]
    for name, value in build_args.items():
        argv += ["--build-arg", f"{name}={value}"]
    for name, path in secrets.items():
        argv += ["--secret", f"id={name},src={path}"]
    return [*argv, context]


# -- the Debian base image --


def debian_sources(suite: str = BASE_SUITE) -> tuple[str, ...]:
    return (
        f"deb {DEBIAN_MIRROR} {suite} main",
        f"deb {DEBIAN_MIRROR} {suite}-updates main",
        f"deb {DEBIAN_SECURITY} {suite}-security main",
    )


def base_key(recipe: Sequence[str]) -> str:
    """A short digest of how the base is made (mmdebstrap's command with a fixed target,
    the image's environment): changing any of it makes a new base."""
    digest = hashlib.sha256(repr((tuple(recipe), BASE_ENV)).encode())
    return digest.hexdigest()[:12]


def base_tag(key: str) -> str:
    return f"{BASE_REPOSITORY}:{BASE_SUITE}-{key}"


def mmdebstrap_argv(
    target: Path,
    sources: Sequence[str],
    *,
    suite: str = BASE_SUITE,
    packages: Sequence[str] = BASE_PACKAGES,
) -> list[str]:
    return [
        "mmdebstrap",
        "--variant=minbase",
        f"--include={','.join(packages)}",
        # Debian's pip refuses the system Python (PEP 668): a venv, first on PATH.
        f'--customize-hook=chroot "$1" python3 -m venv {BASE_VENV}',
        # No manual pages, translations or documents besides the copyright files (also
        # for packages installed later: dpkg keeps these settings); no apt lists.
        *(f"--dpkgopt=path-exclude=/usr/share/{path}/*" for path in ("man", "locale", "doc")),
        "--dpkgopt=path-include=/usr/share/doc/*/copyright",
        '--customize-hook=rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*',
        suite,
        str(target),
        *sources,
    ]


def import_argv(tool: str, tarball: Path, tag: str) -> list[str]:
    """Import a root file system tarball as an image (buildah shares podman's storage)."""
    importer = "docker" if tool == "docker" else "podman"
    changes: list[str] = []
    for env in BASE_ENV:
        changes += ["--change", f"ENV {env}"]
    return [importer, "import", *changes, str(tarball), tag]


def image_exists(tool: str, tag: str, env: Mapping[str, str]) -> bool:
    inspector = "docker" if tool == "docker" else "podman"
    result = subprocess.run(
        [inspector, "image", "inspect", tag], capture_output=True, env=dict(env), check=False
    )
    return result.returncode == 0


def ensure_base(tool: str, cache: Path, *, progress: Progress = print) -> str:
    """The local Debian base image's tag, made (first time) and imported into `tool`."""
    sources = debian_sources()
    tag = base_tag(base_key(mmdebstrap_argv(Path("rootfs.tar"), sources)))
    env = tool_environ(tool, cache)
    if image_exists(tool, tag, env):
        return tag
    tarball = cache / "images" / f"{tag.rpartition(':')[2]}.tar"
    if not tarball.is_file():
        if shutil.which("mmdebstrap") is None:
            raise ClusterError("mmdebstrap is not installed (apt-get install -y mmdebstrap)")
        tarball.parent.mkdir(parents=True, exist_ok=True)
        log = cache / "logs" / f"base-{tarball.stem}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        progress(
            f"making the base image {tag} from Debian packages (first time only; about "
            f"1.5 minutes; log: {log})"
        )
        started = time.monotonic()
        with tempfile.TemporaryDirectory(dir=tarball.parent) as work:
            partial = Path(work) / tarball.name
            with (
                log.open("w", encoding="utf-8") as out,
                Ticker(f"making the base image {tag}"),
            ):
                made = subprocess.run(
                    mmdebstrap_argv(partial, sources), stdout=out, stderr=subprocess.STDOUT
                )
            if made.returncode != 0:
                raise ClusterError(f"mmdebstrap failed (exit {made.returncode}); see {log}")
            os.replace(partial, tarball)
        progress(f"made the base root file system in {time.monotonic() - started:.0f} s")
    result = subprocess.run(
        import_argv(tool, tarball, tag), capture_output=True, text=True, env=env
    )
    if result.returncode != 0:
        raise ClusterError(f"importing {tarball} as {tag} failed: {result.stderr.strip()}")
    return tag


def build(
    tool: str,
    *,
    tag: str,
    dockerfile: str,
    context: str,
    cache: Path,
    build_args: Mapping[str, str] | None = None,
    progress: Progress = print,
) -> list[str]:
    """Build `dockerfile` as `tag` with `tool`; `BASE_IMAGE=local` in `build_args` means
    the Debian base made here. Returns the command that ran."""
    check_tool(tool)
    arguments = dict(build_args or {})
    if arguments.get("BASE_IMAGE") == LOCAL_BASE:
        arguments["BASE_IMAGE"] = ensure_base(tool, cache, progress=progress)
    if arguments.get("OPM_IMAGE") == LOCAL_BASE:
        arguments["OPM_IMAGE"] = ensure_opm_image(tool, cache, progress=progress)
    env = tool_environ(tool, cache)
    with tempfile.TemporaryDirectory(prefix="pip-access-") as work:
        access = host_pip_access(Path(work))
        argv = build_argv(
            tool,
            tag=tag,
            dockerfile=dockerfile,
            context=context,
            build_args=arguments,
            secrets=access.secrets(),
        )
        progress("+ " + " ".join(argv))
        # The builder's own output scrolls: elapsed-time lines only, every 30 s.
        with Ticker(f"building image {tag}", plain=True):
            result = subprocess.run(argv, env=env, check=False)
    if result.returncode != 0:
        raise ClusterError(f"{tool} build of {tag} failed (exit {result.returncode})")
    return argv


def is_loopback_registry(image: str) -> bool:
    host = image.split("/", 1)[0]
    return "/" in image and host.rpartition(":")[0] in ("127.0.0.1", "localhost", "[::1]")


def push_argv(tool: str, image: str) -> list[str]:
    """The push command; a registry on loopback speaks plain HTTP (docker allows that for
    loopback addresses by itself)."""
    argv = [tool, "push"]
    if tool in ("podman", "buildah") and is_loopback_registry(image):
        argv.append("--tls-verify=false")
    return [*argv, image]


def push(tool: str, image: str, *, cache: Path, progress: Progress = print) -> None:
    check_tool(tool)
    argv = push_argv(tool, image)
    progress("+ " + " ".join(argv))
    result = subprocess.run(argv, env=tool_environ(tool, cache), check=False)
    if result.returncode != 0:
        raise ClusterError(f"{tool} push of {image} failed (exit {result.returncode})")


# -- an opm image for catalog images, from the opm built here --

OPM_REPOSITORY = "localhost/ansible-operator-opm"
OPM_DOCKERFILE = """\
# opm (built from its Go module, static) as /bin/opm, the catalog images' base, with the
# grpc_health_probe OLM's catalog operator probes registry pods with; /tmp for opm's
# cache, writable by any user as in operator-framework's image.
FROM scratch
COPY rootfs/ /
COPY opm grpc_health_probe /bin/
ENV PATH=/bin
USER 1001
ENTRYPOINT ["/bin/opm"]
"""


def build_context_image(
    tool: str,
    *,
    tag: str,
    dockerfile: str,
    files: Mapping[str, Path],
    cache: Path,
    shared_dirs: Sequence[str] = (),
    progress: Progress = print,
) -> None:
    """Build `dockerfile` in a context holding `files` (name -> path) and `rootfs/<dir>`
    (mode 1777, like /tmp) for each of `shared_dirs`, unless `tag` (which names a digest
    of the inputs) already exists."""
    env = tool_environ(tool, cache)
    if image_exists(tool, tag, env):
        return
    with tempfile.TemporaryDirectory(prefix="image-context-") as work:
        for name, path in files.items():
            shutil.copy2(path, Path(work) / name)
        (Path(work) / "rootfs").mkdir()
        for directory in shared_dirs:
            shared = Path(work) / "rootfs" / directory.strip("/")
            shared.mkdir(parents=True)
            shared.chmod(0o1777)
        (Path(work) / "Dockerfile").write_text(dockerfile, encoding="utf-8")
        argv = build_argv(
            tool, tag=tag, dockerfile=f"{work}/Dockerfile", context=work, build_args={}, secrets={}
        )
        progress("+ " + " ".join(argv))
        # The builder's own output scrolls: elapsed-time lines only, every 30 s.
        with Ticker(f"building image {tag}", plain=True):
            result = subprocess.run(argv, env=env, check=False)
    if result.returncode != 0:
        raise ClusterError(f"{tool} build of {tag} failed (exit {result.returncode})")


def inputs_digest(dockerfile: str, files: Mapping[str, Path]) -> str:
    """A short digest of a Dockerfile and the files of its context."""
    digest = hashlib.sha256(dockerfile.encode())
    for name in sorted(files):
        digest.update(name.encode() + b"\0")
        with files[name].open("rb") as stream:
            digest.update(hashlib.file_digest(stream, "sha256").digest())
    return digest.hexdigest()[:12]


def ensure_opm_image(tool: str, cache: Path, *, progress: Progress = print) -> str:
    """The tag of an image holding the opm built here (built first time)."""
    # The Go build machinery only here: `ansible-operator run` builds the `image`
    # sub-command's parser, which reads this module's names.
    from runner.devtools.cluster import build as go_build
    from runner.devtools.cluster.components import olm_utilities, tools

    opm = tools()["opm"]
    probe = olm_utilities()["grpc_health_probe"]
    files = {
        "opm": go_build.ensure_built([opm], root=cache, progress=progress)["opm"],
        "grpc_health_probe": go_build.ensure_built([probe], root=cache, progress=progress)[
            "grpc_health_probe"
        ],
    }
    tag = f"{OPM_REPOSITORY}:{opm.version}-{inputs_digest(OPM_DOCKERFILE, files)}"
    build_context_image(
        tool,
        tag=tag,
        dockerfile=OPM_DOCKERFILE,
        files=files,
        cache=cache,
        shared_dirs=("tmp",),
        progress=progress,
    )
    return tag

"""The `ansible-operator` command: parse arguments, call one function, print.

Sub-commands are thin; the work lives in the packages they call. Heavy imports happen
inside the handlers so that `--help` and `version` stay fast.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TextIO, cast

from runner.cli import historycmd as history_commands
from runner.cli import olmcmd as olm_commands
from runner.cli import packagingcmd as packaging_commands
from runner.cli import scaffoldcmd as scaffold_commands
from runner.errors import AnsibleOperatorError

Handler = Callable[[argparse.Namespace], int]
TRACEBACK_ENV = "ANSIBLE_OPERATOR_TRACEBACK"
"""Set to 1 to see the traceback of an unexpected error instead of its one-line summary."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: the problem and where to read more, no usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


class _PipeSafeStdout(io.TextIOBase):
    """stdout that, once its reader is gone (`init | head -1`), drops further output
    instead of raising BrokenPipeError: the command still finishes its work."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._broken = False

    def _closed_pipe(self) -> None:
        self._broken = True
        # The interpreter flushes the real stdout at exit: give it somewhere to go.
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        except (OSError, ValueError):
            pass
        finally:
            os.close(devnull)

    def write(self, text: str) -> int:
        if not self._broken:
            try:
                self._stream.write(text)
                if "\n" in text:
                    self._stream.flush()
            except BrokenPipeError:
                self._closed_pipe()
        return len(text)

    def flush(self) -> None:
        if not self._broken:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._closed_pipe()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._stream.encoding


class _VersionAction(argparse._VersionAction):
    """`--version`, with the version read only when the option is given."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        from runner import __version__

        self.version = f"ansible-operator {__version__}"
        super().__call__(parser, namespace, values, option_string)


def _cmd_version(_args: argparse.Namespace) -> int:
    from runner.cli.versioncmd import version_lines

    print("\n".join(version_lines()))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from runner.cli.runsettings import settings_from
    from runner.operator.run import run

    return run(settings_from(args, os.environ))


def _add_registry_arguments(parser: argparse.ArgumentParser, *, prefix: str) -> None:
    parser.add_argument(
        f"--{prefix}port", dest="registry_port", type=int, help="registry port (default: free)"
    )
    parser.add_argument(
        f"--{prefix}tls",
        dest="registry_tls",
        action="store_true",
        help="serve HTTPS with a certificate from the cluster's CA (default: plain HTTP)",
    )


def _add_completion(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from runner.cli.completion import SHELLS

    completion = sub.add_parser(
        "completion",
        help="print or install a shell completion script: bash, zsh or fish",
        description="Print the completion script of a shell, or install it where the shell "
        "looks for it (--install). Load it in the current shell with `source "
        "<(ansible-operator completion bash)` (zsh: the same with zsh; fish: "
        "`ansible-operator completion fish | source`). --install saves it for this user: "
        "bash: ~/.local/share/bash-completion/completions/ansible-operator (bash-completion "
        "loads it), zsh: ~/.local/share/zsh/site-functions/_ansible-operator (a directory "
        "to put on $fpath; the line is printed), fish: "
        "~/.config/fish/completions/ansible-operator.fish.",
    )
    completion.add_argument(
        "shell",
        nargs="?",
        choices=SHELLS,
        metavar="SHELL",
        help="bash, zsh or fish (with --install: default from $SHELL)",
    )
    completion.add_argument(
        "--install",
        action="store_true",
        help="save the script where the shell looks for it instead of printing it",
    )
    completion.add_argument(
        "--dir",
        metavar="DIR",
        help="with --install: save it in DIR instead (e.g. a system-wide completions directory)",
    )
    completion.set_defaults(handler=_cmd_completion)


def _cmd_completion(args: argparse.Namespace) -> int:
    from pathlib import Path

    from runner.cli import completioninstall
    from runner.cli.completion import render
    from runner.errors import ConfigError

    if not args.install:
        if args.shell is None or args.dir is not None:
            raise ConfigError(
                "completion: name the shell (bash, zsh or fish) to print its script; "
                "--dir goes with --install"
            )
        print(render(args.shell, build_parser()), end="")
        return 0
    shell = args.shell or completioninstall.shell_of(os.environ)
    if args.dir is not None:
        target = Path(args.dir) / completioninstall.file_name(shell)
    else:
        target = completioninstall.install_path(shell, os.environ)
    completioninstall.install(shell, render(shell, build_parser()), target)
    print(f"installed the {shell} completion: {target}")
    print(completioninstall.what_next(shell, target))
    return 0


def _cmd_cluster(args: argparse.Namespace) -> int:
    # Imported when used: the control plane's modules are no part of `run`'s process.
    from runner.cli import clustercmd as commands

    return commands.dispatch(args)


def _add_cluster(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cluster = sub.add_parser(
        "cluster",
        help="a local Kubernetes control plane (etcd, kube-apiserver, ...) built from Go",
        description="Run a real local control plane on loopback ports, without Docker.",
    )
    cluster.add_argument(
        "--state-dir",
        help="where the cluster keeps its state "
        "(default: $ANSIBLE_OPERATOR_CLUSTER_DIR or ./.cluster)",
    )
    actions = cluster.add_subparsers(dest="action", required=True, metavar="ACTION")
    up = actions.add_parser("up", help="build (first time) and start the cluster")
    up.add_argument("--apiserver-port", type=int, help="fixed API server port (default: free)")
    up.add_argument(
        "--real-node",
        action="store_true",
        help="also start a real node (kubelet, containerd, runc, a CNI bridge) beside the "
        "fake one; works on a running cluster too (needs root and Debian's containerd, runc, "
        "containernetworking-plugins and catatonit packages)",
    )
    up.add_argument(
        "--build-only",
        action="store_true",
        help="only build the binaries (and operator-sdk, opm and OLM's operators)",
    )
    _add_registry_arguments(up, prefix="registry-")
    up.add_argument(
        "--registry",
        action="store_true",
        help="also start the image registry on loopback (see `cluster registry`)",
    )
    down = actions.add_parser("down", help="stop the cluster and remove its state")
    down.add_argument("--keep", action="store_true", help="keep the state directory")
    actions.add_parser("status", help="what runs, where, since when")
    registry = actions.add_parser(
        "registry",
        help="start (first time: build) the image registry beside the running cluster",
    )
    _add_registry_arguments(registry, prefix="")
    registry.add_argument("--stop", action="store_true", help="stop the registry instead")
    actions.add_parser(
        "tools", help="build (first time) the OLM validators operator-sdk and opm; print paths"
    )
    actions.add_parser("kubeconfig", help="print the admin kubeconfig path")
    actions.add_parser("env", help="print `export KUBECONFIG=...`")
    kubectl = actions.add_parser(
        "kubectl",
        help="run the cached kubectl (same version as the cluster); "
        "uses the cluster's kubeconfig unless KUBECONFIG is set",
    )
    kubectl.add_argument("kubectl_args", nargs=argparse.REMAINDER, metavar="ARGS")
    cluster.set_defaults(handler=_cmd_cluster)


def build_parser() -> argparse.ArgumentParser:
    from runner.cli.runflags import add_run_arguments

    parser = Parser(
        prog="ansible-operator",
        description="Kubernetes operators written as Ansible roles and playbooks.",
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    # Sub-commands are made by `Parser` too (argparse uses the parent's class).
    sub = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="command", required=True, metavar="COMMAND"),
    )
    run = sub.add_parser(
        "run",
        help="run the operator described by watches.yaml",
        description="Watch the custom resources listed in watches.yaml and reconcile each "
        "with its Ansible role or playbook.",
    )
    add_run_arguments(run)
    run.set_defaults(handler=_cmd_run)
    version = sub.add_parser(
        "version",
        help="print the versions of the tool and what it runs with, and how it was installed",
    )
    version.set_defaults(handler=_cmd_version)
    _add_cluster(sub)
    from runner.cli import imagecmd as image_commands

    image_commands.add_commands(sub)
    scaffold_commands.add_commands(sub)
    packaging_commands.add_commands(sub)
    olm_commands.add_commands(sub)
    history_commands.add_commands(sub)
    from runner.sharding import ringstatus as sharding_commands

    sharding_commands.add_commands(sub)
    from runner.cli import varscmd

    varscmd.add_commands(sub)
    from runner.cli import plancmd

    plancmd.add_commands(sub)
    _add_completion(sub)
    return parser


_USAGE_ERROR_IS_1 = frozenset({"plan"})
"""Sub-commands whose exit code 2 means something else than a usage error (`plan`: the
reconcile would change something); their usage errors exit 1."""


def _command(argv: Sequence[str]) -> str:
    """The sub-command `argv` names: its first word not an option ("" when none)."""
    return next((word for word in argv if not word.startswith("-")), "")


def _split_passthrough(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """`cluster [opts] kubectl ARGS...`: everything after `kubectl` belongs to kubectl,
    options included (argparse would try to read `-n ns` itself)."""
    if "cluster" in argv and "kubectl" in argv[argv.index("cluster") :]:
        at = argv.index("kubectl", argv.index("cluster"))
        return argv[: at + 1], argv[at + 1 :]
    return argv, None


def main(argv: Sequence[str] | None = None) -> int:
    stdout = sys.stdout
    if isinstance(stdout, io.TextIOWrapper):
        sys.stdout = _PipeSafeStdout(stdout)
    try:
        return _main(argv)
    finally:
        sys.stdout.flush()
        sys.stdout = stdout


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    own, passthrough = _split_passthrough(list(sys.argv[1:] if argv is None else argv))
    try:
        args = parser.parse_args(own)
    except SystemExit as done:
        # argparse exits 2 for a usage error; to `plan`, 2 means "changes".
        if done.code == 2 and _command(own) in _USAGE_ERROR_IS_1:
            return 1
        raise
    if passthrough is not None:
        args.kubectl_args = passthrough
    handler: Handler = args.handler
    try:
        return handler(args)
    except AnsibleOperatorError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as err:
        # A bug of ours: one line a user can report; the traceback on request.
        if os.environ.get(TRACEBACK_ENV, "") not in ("", "0"):
            traceback.print_exc()
        else:
            print(
                f"error: unexpected {type(err).__name__}: {err} "
                f"(set {TRACEBACK_ENV}=1 to see where; please report it)",
                file=sys.stderr,
            )
        return 1

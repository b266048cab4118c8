"""Kubernetes modules run from the controller's own installation, without an AnsiballZ payload.

For every Python module task ansible-core builds an AnsiballZ payload: it parses the
module and every module_utils file it imports (about a hundred for `kubernetes.core.k8s`,
0.4-0.8 s of CPU the first time in a run) into a zip, which the wrapper on the target
decodes, writes to a temporary directory and imports from. On the `local` connection with
the controller's own interpreter, that target *is* the controller's installation: the
same files, found through the same collection paths. So for the modules of the
collections that operator roles run on every reconcile (`DIRECT_PREFIXES`), the fast
backend's zygote replaces the payload by a small program that imports the module from
those collection paths and runs it through ansible-core's own module loader
(`_loader.run_module`, what the AnsiballZ wrapper calls) with the same JSON arguments,
serialization profile and open-files limit.

`install()` wraps `module_common._find_module_utils`. A module gets the direct program only
if all of these hold (else the payload is built as usual): a new-style Python module of an
allow-listed collection, the interpreter ansible chose for the task is this interpreter
(same virtualenv), no become, no async, no AnsiballZ extension (debugger, coverage), no
locale or `PYTHON*` variable in the task's environment, and the file ansible resolved is
the one Python's import system finds under the module's name. The connection
(`modexec`) then runs the program in the run's own process (`inprocess`), where
everything it imports is already imported; a program that reaches a new interpreter
instead (pipelining off, say) works there too: it installs the collection finder with
the same paths first.

What a module can tell: its `__file__` is the installed file rather than a path inside a
payload zip, and there is no `_ansiballz_*_payload_*` temporary directory.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from runner.ansible.hooks import builder

__all__ = [
    "DIRECT_PREFIXES",
    "INTERPRETER_VARIABLES",
    "MARKER",
    "install",
    "module_of",
    "program",
    "this_interpreter",
    "warm",
]

DIRECT_PREFIXES = (
    "ansible_collections.kubernetes.core.plugins.modules.",
    "ansible_collections.operator_sdk.util.plugins.modules.",
)
"""Modules that run without a payload: the Kubernetes modules of operator roles."""

MARKER = "# ansible-operator: direct module (no AnsiballZ payload): "
"""The second line of a direct program (the first is the shebang), then the module."""

INTERPRETER_VARIABLES = ("PYTHON", "LC_", "LANG")
"""Prefixes of environment variables that make a new interpreter behave differently from
this one: a task setting any of them gets a new interpreter."""
_profiles: dict[str, str] = {}
"""sha256 of a module's source -> its serialization profile (filled by `warm` too)."""


def module_of(source: bytes) -> str | None:
    """The module a direct program runs, or None: `source` is not one (see `program`)."""
    first, _, rest = source.partition(b"\n")
    second = rest.partition(b"\n")[0].decode("utf-8", errors="replace")
    if not first.startswith(b"#!") or not second.startswith(MARKER):
        return None
    fqn = second.removeprefix(MARKER)
    return fqn if _allowed(fqn) else None


def program(
    *,
    shebang: str,
    module_fqn: str,
    params: str,
    profile: str | None,
    rlimit_nofile: int,
    collection_paths: Sequence[str],
) -> bytes:
    """The direct program for one module task (pure; `params` is the encoded JSON).

    `profile` is the module's serialization profile (ansible-core 2.19); None for 2.18,
    whose modules have none: the program then runs the module as 2.18's wrapper does.
    """
    return f"""{shebang}
{MARKER}{module_fqn}
# The module and its module_utils are imported from the controller's own installation,
# through the collection paths below, and run by ansible-core's module loader.


def _main():
    import os
    import sys

    try:
        os.getcwd()
    except OSError:
        try:
            os.chdir(os.path.expanduser("~"))
        except OSError:
            os.chdir("/")
    if {rlimit_nofile!r}:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = min(hard, {rlimit_nofile!r})
        if wanted != soft:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            except ValueError:
                pass
    sys.path[:] = [entry for entry in sys.path if entry not in ("", ".")]
    from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

    if not any(isinstance(finder, _AnsibleCollectionFinder) for finder in sys.meta_path):
        _AnsibleCollectionFinder(paths={list(collection_paths)!r}, scan_sys_paths=False)._install()
{_run_2_19(params, profile, module_fqn) if profile is not None else _run_2_18(params, module_fqn)}

if __name__ == "__main__":
    _main()
""".encode()


def _run_2_19(params: str, profile: str, module_fqn: str) -> str:
    """How ansible-core 2.19's AnsiballZ wrapper runs a module (its module loader)."""
    return f"""    from ansible.module_utils._internal._ansiballz import _loader

    _loader.run_module(
        json_params={params!r}.encode(),
        profile={profile!r},
        module_fqn={module_fqn!r},
        modlib_path="",
        extensions={{}},
    )
"""


def _run_2_18(params: str, module_fqn: str) -> str:
    """How ansible-core 2.18's AnsiballZ wrapper runs a module (`invoke_module`)."""
    return f"""    import runpy

    from ansible.module_utils import basic

    basic._ANSIBLE_ARGS = {params!r}.encode()
    runpy.run_module(
        mod_name={module_fqn!r},
        init_globals=dict(_module_fqn={module_fqn!r}, _modlib_path=""),
        run_name="__main__",
        alter_sys=True,
    )
    print('{{"msg": "New-style module did not handle its own exit", "failed": true}}')
    sys.exit(1)
"""


def install() -> None:
    """Give eligible modules a direct program instead of a payload (see the docstring)."""
    from ansible.executor import module_common

    if getattr(module_common, "_runner_direct", False):
        return
    real_find = module_common._find_module_utils

    # `builder.arguments` binds a call by the signature this wraps (`__wrapped__`).
    @functools.wraps(real_find)
    def find_module_utils(*args: Any, **kwargs: Any) -> Any:
        built = _direct(module_common, builder.arguments(real_find, args, kwargs))
        return built if built is not None else real_find(*args, **kwargs)

    module_common._find_module_utils = find_module_utils
    module_common._runner_direct = True


def warm(module_paths: Sequence[str]) -> None:
    """Work out the serialization profiles of these modules now (the zygote's warm-up)."""
    from ansible.executor import module_common

    if not builder.modern(module_common):
        return  # 2.18: modules have no serialization profile
    for path in module_paths:
        try:
            with open(path, "rb") as handle:
                _profile(module_common, os.path.basename(path), handle.read())
        except Exception:  # best effort: a run works it out again
            continue


# -- the decision -----------------------------------------------------------------------


def _direct(module_common: Any, kwargs: Mapping[str, Any]) -> Any:
    data, path = kwargs.get("b_module_data"), kwargs.get("module_path")
    if not isinstance(data, bytes) or not isinstance(path, str):
        return None
    if kwargs.get("async_timeout") or builder.becomes(kwargs):
        return None
    environment = kwargs.get("environment") or {}
    if any(str(name).startswith(INTERPRETER_VARIABLES) for name in environment):
        return None
    if module_common.REPLACER in data or not module_common.NEW_STYLE_PYTHON_MODULE_RE.search(data):
        return None
    if module_common._is_binary(data):
        return None
    try:
        fqn = module_common._get_ansible_module_fqn(path)
    except ValueError:
        return None
    if not _allowed(fqn) or not _imports_as(fqn, path):
        return None
    task_vars = kwargs.get("task_vars") or {}
    templar = kwargs.get("templar")
    if builder.extensions(module_common, task_vars).names:
        return None
    interpreter, arguments = module_common._extract_interpreter(data)
    shebang, chosen = module_common._get_shebang(
        interpreter or "/usr/bin/python",
        task_vars,
        templar,
        arguments,
        remote_is_local=bool(kwargs.get("remote_is_local")),
    )
    if not this_interpreter(str(chosen)):
        return None
    modern = builder.modern(module_common)
    profile = _profile(module_common, str(kwargs.get("module_name")), data) if modern else None
    built = program(
        shebang=shebang,
        module_fqn=fqn,
        params=_encoded_params(profile, kwargs.get("module_args") or {}, kwargs),
        profile=profile,
        rlimit_nofile=_rlimit_nofile(task_vars, templar, modern=modern),
        collection_paths=_collection_paths(),
    )
    if not modern:
        return built, "new", shebang
    return module_common._BuiltModule(
        b_module_data=built,
        module_style="new",
        shebang=shebang,
        serialization_profile=profile,
    )


def _allowed(fqn: str) -> bool:
    return all(part.isidentifier() for part in fqn.split(".")) and fqn.startswith(DIRECT_PREFIXES)


def _imports_as(fqn: str, path: str) -> bool:
    """Python's import system finds `fqn` at `path` (the file ansible resolved)."""
    try:
        spec = importlib.util.find_spec(fqn)
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.origin:
        return False
    try:
        return os.path.samefile(spec.origin, path)
    except OSError:
        return False


def this_interpreter(path: str) -> bool:
    """The same Python binary in the same directory (so the same virtualenv)."""
    current = sys.executable
    if os.path.dirname(os.path.abspath(path)) != os.path.dirname(os.path.abspath(current)):
        return False
    try:
        return os.path.samefile(path, current)
    except OSError:
        return False


def _profile(module_common: Any, name: str, data: bytes) -> str:
    key = hashlib.sha256(data).hexdigest()
    profile = _profiles.get(key)
    if profile is None:
        tree = module_common._compile_module_ast(name, data)
        profile = str(module_common._get_module_metadata(tree).serialization_profile)
        _profiles[key] = profile
    return profile


def _encoded_params(
    profile: str | None, module_args: Mapping[Any, Any], kwargs: Mapping[str, Any]
) -> str:
    """The module's arguments as the AnsiballZ wrapper would carry them (same errors)."""
    import json

    from ansible.errors import AnsibleError

    if profile is None:  # 2.18
        from ansible.module_utils.common.json import AnsibleJSONEncoder

        try:
            return json.dumps(
                {"ANSIBLE_MODULE_ARGS": module_args}, cls=AnsibleJSONEncoder, vault_to_text=True
            )
        except TypeError as ex:
            raise AnsibleError(
                f"Unable to pass options to module, they must be JSON serializable: {ex}"
            ) from ex

    from ansible.module_utils.common.json import Direction, get_module_encoder

    encoder = get_module_encoder(profile, Direction.CONTROLLER_TO_MODULE)
    try:
        return json.dumps({"ANSIBLE_MODULE_ARGS": module_args}, cls=encoder)
    except TypeError as ex:
        name = kwargs.get("module_name")
        raise AnsibleError(f"Failed to serialize arguments for the {name!r} module.") from ex


def _rlimit_nofile(task_vars: Mapping[str, Any], templar: Any, *, modern: bool) -> int:
    from ansible import constants

    value = constants.config.get_config_value("PYTHON_MODULE_RLIMIT_NOFILE", variables=task_vars)
    if isinstance(value, int):
        return value
    if not modern:
        return int(templar.template(value))
    from ansible._internal._templating._engine import TemplateOptions

    return int(templar._engine.template(value, options=TemplateOptions(value_for_omit=0)))


def _collection_paths() -> list[str]:
    """Where the controller's collection finder looks, in its order (playbook paths first)."""
    from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

    for finder in sys.meta_path:
        if isinstance(finder, _AnsibleCollectionFinder):
            return [str(path) for path in finder._n_collection_paths]
    return []

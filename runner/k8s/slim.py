"""Import kubernetes-asyncio without its generated API and model classes.

`import kubernetes_asyncio` runs package initialisers that import every generated API
class and every model class (about 950 modules): some 37 MiB of memory and two seconds of
start-up in every operator process, for classes this runtime never uses (it sends raw
JSON through `ApiClient.call_api` and decodes the answers itself). `install` registers the
packages `kubernetes_asyncio`, `kubernetes_asyncio.client` and
`kubernetes_asyncio.client.models` without running their initialisers, and puts on them
what our client and the library's kubeconfig loader import: `Configuration`,
`ApiClient`, `config`. Any other name asked of them runs the real initialiser first, so
code that wants a model or an API class still gets it, only later.

Importing this module installs it; `runner.k8s` imports it before anything else, so it
runs before kubernetes_asyncio is imported. When the library is already imported, it does
nothing.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any

_TOP = "kubernetes_asyncio"


def install() -> None:
    if _TOP in sys.modules:
        return
    try:
        _install()
    except Exception:  # another layout of the library: import it the ordinary way
        for name in [n for n in sys.modules if n == _TOP or n.startswith(f"{_TOP}.")]:
            del sys.modules[name]


def _install() -> None:
    top = _unexecuted(_TOP)
    client = _unexecuted(f"{_TOP}.client")
    top.client = client  # type: ignore[attr-defined]
    client.models = _unexecuted(f"{_TOP}.client.models")  # type: ignore[attr-defined]
    configuration = importlib.import_module(f"{_TOP}.client.configuration")
    api_client = importlib.import_module(f"{_TOP}.client.api_client")
    client.Configuration = configuration.Configuration  # type: ignore[attr-defined]
    client.ApiClient = api_client.ApiClient  # type: ignore[attr-defined]
    top.config = importlib.import_module(f"{_TOP}.config")  # type: ignore[attr-defined]


def _unexecuted(name: str) -> ModuleType:
    """Package `name` in sys.modules, its submodules importable, its __init__ not run
    until a name it would define is asked for."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"no module named {name!r}")
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader
    state = {"running": False}

    def complete(attribute: str) -> Any:
        if attribute.startswith("__") or state["running"]:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
        if importlib.util.find_spec(f"{name}.{attribute}") is not None:
            return importlib.import_module(f"{name}.{attribute}")  # a submodule: just it
        state["running"] = True
        loader.exec_module(module)  # defines every name, keeps those set already
        del module.__dict__["__getattr__"]
        return getattr(module, attribute)

    module.__getattr__ = complete  # type: ignore[method-assign]
    sys.modules[name] = module
    return module


install()

__all__ = ["install"]

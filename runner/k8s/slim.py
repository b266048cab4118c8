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

Two more costs of those imports, for things the runtime never uses, are left out:

- aiohttp makes two default SSL contexts when imported, parsing the CA bundle twice (a
  quarter of the instructions of `run`'s imports, about 0.1 s): it is imported here with
  the bundle file out of sight, and the two contexts load it in a thread of their own
  (OpenSSL lets the interpreter go on meanwhile), on the other core, while the operator
  goes on starting. Until then they verify against the CA directory only. The
  runtime's own connections never use them (each gives aiohttp its SSL context, made
  from the kubeconfig);
- `kubernetes_asyncio.client.configuration` imports urllib3 and never uses it: the
  import sees a placeholder (urllib3 stays unimported, and importable);
- `kubernetes_asyncio.client.api_client` imports python-dateutil's parser (for model
  classes' dates: with it `decimal`, `zoneinfo`, `ctypes`...) and multiprocessing's
  `ThreadPool` (for `async_req` calls), which the runtime never uses: the import binds
  stand-ins that import the real ones when first called, and behave as they do from then
  on (both modules stay importable as ever). About a tenth of `run`'s import time.

Importing this module installs it; `runner.k8s` imports it before anything else, so it
runs before kubernetes_asyncio is imported. When the library is already imported, it does
nothing.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import ssl
import sys
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

_TOP = "kubernetes_asyncio"


def install() -> None:
    if _TOP in sys.modules:
        return
    _import_aiohttp()
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
    with _placeholder("urllib3"):
        configuration = importlib.import_module(f"{_TOP}.client.configuration")
    with _deferred("dateutil.parser", "parse"), _deferred("multiprocessing.pool", "ThreadPool"):
        api_client = importlib.import_module(f"{_TOP}.client.api_client")
    client.Configuration = configuration.Configuration  # type: ignore[attr-defined]
    client.ApiClient = api_client.ApiClient  # type: ignore[attr-defined]
    top.config = importlib.import_module(f"{_TOP}.config")  # type: ignore[attr-defined]


def _import_aiohttp() -> None:
    """Import aiohttp with its default SSL contexts' CA bundle loaded in a thread.

    While aiohttp is imported, the CA bundle file (SSL_CERT_FILE, else OpenSSL's default)
    is a missing file: OpenSSL skips it (and clears the error) and keeps the CA directory,
    which it reads only on demand. Then a thread sets the default paths of those
    contexts again with the real environment, as their making would have. Done only
    while this is the process's one thread (the environment is the process's)."""
    if "aiohttp" in sys.modules or threading.active_count() > 1:
        importlib.import_module("aiohttp")
        return
    saved = os.environ.get("SSL_CERT_FILE")
    os.environ["SSL_CERT_FILE"] = os.path.join(os.sep, "nonexistent", "ansible-operator-ca")
    try:
        connector = importlib.import_module("aiohttp.connector")
        importlib.import_module("aiohttp")
    finally:
        if saved is None:
            del os.environ["SSL_CERT_FILE"]
        else:
            os.environ["SSL_CERT_FILE"] = saved
    contexts = [value for value in vars(connector).values() if isinstance(value, ssl.SSLContext)]
    threading.Thread(
        target=_load_default_certs, args=(contexts,), name="ca-bundle", daemon=True
    ).start()


def _load_default_certs(contexts: list[ssl.SSLContext]) -> None:
    """What aiohttp's import would have loaded into its default contexts (OpenSSL lets
    other threads run meanwhile)."""
    for context in contexts:
        context.set_default_verify_paths()


@contextlib.contextmanager
def _placeholder(name: str) -> Iterator[None]:
    """While the block imports modules, `import <name>` gives them an empty module;
    afterwards `name` is importable as ever."""
    if name in sys.modules:
        yield
        return
    sys.modules[name] = ModuleType(name, "placeholder: imported by a module that never uses it")
    try:
        yield
    finally:
        del sys.modules[name]


@contextlib.contextmanager
def _deferred(name: str, *attributes: str) -> Iterator[None]:
    """While the block imports modules, `from <name> import <attribute>` gives them a
    stand-in that imports `name` when it is first called and calls the real attribute;
    afterwards `name` is importable as ever."""
    if name in sys.modules:
        yield
        return
    module = ModuleType(name, "stand-ins: the real module is imported at their first call")
    for attribute in attributes:
        setattr(module, attribute, _called_later(name, attribute))
    sys.modules[name] = module
    try:
        yield
    finally:
        if sys.modules.get(name) is module:
            del sys.modules[name]


def _called_later(module: str, attribute: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), attribute)(*args, **kwargs)

    call.__name__ = call.__qualname__ = attribute
    call.__doc__ = f"{module}.{attribute}, imported when first called"
    return call


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

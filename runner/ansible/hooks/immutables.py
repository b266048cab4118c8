"""The `immutables` hook: `copy.deepcopy` returns ansible-core's immutable values as they are.

`copy.deepcopy` returns a `str`, `int` or `bytes` itself (nothing in it can change), but
rebuilds an instance of a subclass through `__reduce_ex__`, one Python call after
another. ansible-core's variables are mostly such subclasses: on 2.19 every string,
number and date read from YAML or templated carries data tags (`_AnsibleTaggedStr`, ...,
each with a mapping of frozen tag dataclasses such as `Origin`), on 2.18 strings are
`AnsibleUnicode` (from YAML) or `AnsibleUnsafeText` (templated). ansible-core deep-copies
all variables in places that run on every task of a real role: `lookup('template')`
copies every variable of the task before rendering the file (ansible-core's
`plugins/lookup/template.py`), the data loader copies each cached file it hands out.
Measured on the installer role's variables (bench/realroles, about 60 variables, the CR
and the role's defaults): 23-45 ms a copy on 2.19, 9 ms on 2.18 — most of a
template-heavy task — and 1.5 ms / 0.6 ms once these types count as atomic.

`install()` registers these exact types with `copy`'s dispatch table as atomic, as `str`
is: the copy of such a value is the value. They are immutable: the scalar types are
subclasses of `str`, `bytes`, `int`, `float` and `datetime`'s types whose extra state
(the tag mapping on 2.19, the YAML position on 2.18) ansible-core sets when it creates an
instance and never changes afterwards (a tag change makes a new instance), and the tags
are frozen dataclasses of immutable fields. So a copy differs from before only in being
the same object (`is`), which nothing in a role can observe. Containers (dicts, lists,
sets, tagged or not) are copied as before. Subclasses of these types are not registered
(the dispatch is by exact type) and keep the default copy.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import importlib.util
from typing import Any

__all__ = ["immutable_types", "install"]

_TAGGED = "ansible.module_utils._internal._datatag"

SCALARS_2_19 = {
    _TAGGED: (
        "_AnsibleTaggedStr",
        "_AnsibleTaggedBytes",
        "_AnsibleTaggedInt",
        "_AnsibleTaggedFloat",
        "_AnsibleTaggedDate",
        "_AnsibleTaggedTime",
        "_AnsibleTaggedDateTime",
    ),
}
"""ansible-core 2.19's immutable scalars: the data-tagged natives (its `unsafe_proxy`
and YAML object names are only kept for older plugins)."""

TAG_MODULES_2_19 = (
    "ansible.module_utils._internal._datatag._tags",
    "ansible._internal._datatag._tags",
    "ansible._internal._templating._datatag",
)
"""Where 2.19 defines its data tags (imported first: a tag type exists once its module
is imported)."""

SCALARS_2_18 = {
    "ansible.utils.unsafe_proxy": (
        "AnsibleUnsafeText",
        "AnsibleUnsafeBytes",
        "NativeJinjaUnsafeText",
    ),
    "ansible.utils.native_jinja": ("NativeJinjaText",),
    "ansible.parsing.yaml.objects": ("AnsibleUnicode",),
}
"""ansible-core 2.18's: templated (unsafe, native) and YAML strings."""


def immutable_types() -> list[type]:
    """The types `install` registers, as this ansible-core has them."""
    tagged = importlib.util.find_spec(_TAGGED.rpartition(".")[0]) is not None and _has(_TAGGED)
    found: list[type] = []
    for module_name, names in (SCALARS_2_19 if tagged else SCALARS_2_18).items():
        module = importlib.import_module(module_name)
        found += [getattr(module, name) for name in names]
    found += _frozen_tags()
    for kind in found:
        if not _immutable(kind):
            raise TypeError(f"{kind.__module__}.{kind.__qualname__} is not an immutable type")
    return found


def _has(module_name: str) -> bool:
    try:
        importlib.import_module(module_name)
    except ImportError:
        return False
    return True


def _frozen_tags() -> list[type]:
    """The data tag types of ansible-core 2.19 (frozen dataclasses), none on 2.18."""
    try:
        from ansible.module_utils._internal._datatag import AnsibleDatatagBase
    except ImportError:
        return []
    for name in TAG_MODULES_2_19:
        importlib.import_module(name)
    tags: list[type] = []
    pending: list[type[Any]] = [AnsibleDatatagBase]
    while pending:
        subclass: type[Any]
        for subclass in pending.pop().__subclasses__():
            pending.append(subclass)
            if dataclasses.is_dataclass(subclass) and subclass not in tags:
                tags.append(subclass)
    return tags


_NATIVE_IMMUTABLES = (str, bytes, int, float)


def _immutable(kind: type) -> bool:
    import datetime

    if dataclasses.is_dataclass(kind):
        params: Any = getattr(kind, "__dataclass_params__", None)
        return bool(params is not None and params.frozen)
    return issubclass(kind, (*_NATIVE_IMMUTABLES, datetime.date, datetime.time))


def install() -> None:
    """From now on (in this process and its forks), `copy.deepcopy` returns these
    values themselves."""
    dispatch: dict[type, Any] = copy._deepcopy_dispatch  # type: ignore[attr-defined]
    atomic = copy._deepcopy_atomic  # type: ignore[attr-defined]
    kinds = immutable_types()
    if not kinds:
        raise LookupError("none of the immutable types is in this ansible-core")
    for kind in kinds:
        dispatch[kind] = atomic

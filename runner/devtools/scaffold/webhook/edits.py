"""The edits `create webhook` makes to files the project has: the kind's webhooks.yaml
entry (added, or extended with the new webhook keys, comments kept; a webhook the kind
already has is refused), a kustomization's `patches`, and the Dockerfile's COPY of
webhooks.yaml. The YAML edits are checked by reading the result back; one that cannot be
made safely is a ConfigError that says what to add by hand. Pure: texts in, texts out.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from runner.devtools.scaffold import yamltext
from runner.devtools.scaffold.names import Resource
from runner.errors import ConfigError
from runner.webhooks import declarations

_WEBHOOKS_FILE = declarations.DEFAULT_FILE

_FLAGS = {
    "validating": "--programmatic-validation",
    "mutating": "--defaulting",
    "conversion": "--conversion",
}


def entry_keys(
    resource: Resource, *, defaulting: bool, validation: bool, conversion: bool
) -> dict[str, Any]:
    """The webhook keys of the kind's webhooks.yaml entry for the chosen webhooks."""
    keys: dict[str, Any] = {}
    if validation:
        keys["validating"] = {
            "role": f"{resource.singular}_validation",
            "operations": ["CREATE", "UPDATE"],
            "failurePolicy": "Fail",
        }
    if defaulting:
        keys["mutating"] = {"role": f"{resource.singular}_defaulting", "failurePolicy": "Fail"}
    if conversion:
        keys["conversion"] = {"role": f"{resource.singular}_conversion"}
    return keys


def refuse_duplicates(
    known: tuple[declarations.Webhook, ...],
    resource: Resource,
    *,
    defaulting: bool,
    validation: bool,
    conversion: bool,
) -> None:
    """ConfigError naming the first webhook asked for that webhooks.yaml already has (an
    admission webhook for this GVK, a conversion webhook for this kind)."""
    asked = [
        t
        for t, chosen in (
            ("validating", validation),
            ("mutating", defaulting),
            ("conversion", conversion),
        )
        if chosen
    ]
    for webhook in known:
        same_kind = webhook.gvk.group == resource.full_group and webhook.gvk.kind == resource.kind
        same_version = webhook.type == "conversion" or webhook.gvk.version == resource.version
        if webhook.type in asked and same_kind and same_version:
            scope = "" if webhook.type == "conversion" else f" {resource.version}"
            raise ConfigError(
                f"{_WEBHOOKS_FILE}: {resource.kind}.{resource.full_group}{scope} already has a "
                f"{webhook.type} webhook ({_FLAGS[webhook.type]}, role "
                f"{webhook.target.name}); nothing was written (edit its entry by hand to "
                "change it)"
            )


def declare(existing: str, resource: Resource, keys: dict[str, Any]) -> str:
    """webhooks.yaml with `keys` declared for the resource: added to the entry of its
    GVK when there is one (the rest of the text, comments included, kept as it is),
    else a new entry at the end."""
    entry: dict[str, Any] = {
        "group": resource.full_group,
        "version": resource.version,
        "kind": resource.kind,
    }
    data = yamltext.load(existing, source=_WEBHOOKS_FILE) if existing.strip() else None
    if isinstance(data, list):
        for index, item in enumerate(data):
            if isinstance(item, dict) and all(item.get(k) == v for k, v in entry.items()):
                return _extend_entry(existing, data, index, keys, resource)
    block = yamltext.dump([{**entry, **keys}], start=False)
    return yamltext.append_block(existing, block) if existing.strip() else block


def _extend_entry(
    text: str, data: list[Any], index: int, keys: dict[str, Any], resource: Resource
) -> str:
    """`keys` added at the end of the block mapping that is entry `index` of `text`."""
    what = f"entry {index + 1} ({resource.kind}.{resource.full_group} {resource.version})"
    by_hand = f"add {', '.join(keys)} to {what} by hand"
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    node = root.value[index] if isinstance(root, yaml.SequenceNode) else None
    if not isinstance(node, yaml.MappingNode) or node.flow_style or not node.value:
        raise ConfigError(f"{_WEBHOOKS_FILE}: {what} is not a block mapping; {by_hand}")
    first_key = node.value[0][0]
    indent = " " * first_key.start_mark.column
    lines = text.splitlines(keepends=True)
    end = node.end_mark
    at = end.line if end.column == 0 else end.line + 1
    # Comments and blank lines after the entry belong to what follows it.
    while at > first_key.start_mark.line + 1 and (
        not lines[at - 1].strip() or lines[at - 1].lstrip().startswith("#")
    ):
        at -= 1
    if at and not lines[at - 1].endswith("\n"):
        lines[at - 1] += "\n"
    added = [indent + line if line.strip() else line for line in _dump_keys(keys)]
    result = "".join([*lines[:at], *added, *lines[at:]])
    expected = [*data[:index], {**data[index], **keys}, *data[index + 1 :]]
    try:
        after = yamltext.load(result, source=_WEBHOOKS_FILE)
    except ConfigError:
        after = None
    if after != expected:
        raise ConfigError(f"{_WEBHOOKS_FILE}: cannot extend {what} automatically; {by_hand}")
    return result


def _dump_keys(keys: dict[str, Any]) -> list[str]:
    return yamltext.dump(keys, start=False).splitlines(keepends=True)


def add_patch(text: str, path: str, source: str) -> str:
    """`patches` of a kustomization with `{path, target: {kind: Deployment}}` added."""
    data = yamltext.load(text, source=source)
    patches = data.get("patches") if isinstance(data, dict) else None
    if isinstance(patches, list) and any(
        isinstance(p, dict) and p.get("path") == path for p in patches
    ):
        return text
    block = f"  - path: {path}\n    target:\n      kind: Deployment\n"
    lines = text.splitlines(keepends=True)
    if "patches:\n" in lines:
        at = lines.index("patches:\n") + 1
        while at < len(lines) and lines[at].startswith((" ", "\t")):
            at += 1
        result = "".join([*lines[:at], block, *lines[at:]])
    else:
        result = yamltext.append_block(text, "patches:\n" + block)
    after = yamltext.load(result, source=source)
    if not isinstance(after, dict) or after.get("patches") != [
        *(patches or []),
        {"path": path, "target": {"kind": "Deployment"}},
    ]:
        raise ConfigError(f"{source}: cannot add the patch {path} automatically; add by hand")
    return result


def dockerfile(text: str) -> str:
    """The Dockerfile with webhooks.yaml copied next to watches.yaml (once)."""
    if re.search(r"^COPY .*webhooks\.yaml", text, flags=re.MULTILINE):
        return text
    match = re.search(r"^COPY (?P<opts>.*?)watches\.yaml .*$", text, flags=re.MULTILINE)
    line = "COPY --chown=1001:0 webhooks.yaml ${HOME}/webhooks.yaml\n"
    if match is None:
        return yamltext.append_block(text, line)
    line = f"COPY {match.group('opts')}webhooks.yaml ${{HOME}}/webhooks.yaml\n"
    end = match.end() + 1
    return text[:end] + line + text[end:]

"""YAML style of scaffolded files and the comment-keeping edits of `create api`."""

from __future__ import annotations

import pytest
import yaml

from runner.devtools.scaffold.yamltext import add_list_item, dump, leading_comments
from runner.errors import ConfigError


def test_dump_style() -> None:
    text = dump(
        {"b": ["x", ""], "a": {"n": "3", "t": "true", "s": "a\nb\n"}, "e": {}},
        header="first\nsecond",
    )
    assert text == (
        "# first\n"
        "# second\n"
        "---\n"
        "b:\n"
        "  - x\n"
        '  - ""\n'
        "a:\n"
        '  n: "3"\n'
        '  t: "true"\n'
        "  s: |\n"
        "    a\n"
        "    b\n"
        "e: {}\n"
    )


def test_dump_never_writes_anchors() -> None:
    shared = {"k": "v"}
    text = dump({"one": shared, "two": shared})
    assert "&" not in text and "*" not in text
    assert yaml.safe_load(text) == {"one": shared, "two": shared}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "# CRDs\nresources: []\n",
            "# CRDs\nresources:\n  - new.yaml\n",
            id="empty-flow-list",
        ),
        pytest.param(
            "resources:\n  - a.yaml\n# keep me\n  - b.yaml\n",
            "resources:\n  - a.yaml\n# keep me\n  - b.yaml\n  - new.yaml\n",
            id="block-list-with-comment",
        ),
        pytest.param(
            "resources:\n- a.yaml\npatches: []\n",
            "resources:\n- a.yaml\n- new.yaml\npatches: []\n",
            id="indentless-list-then-key",
        ),
        pytest.param(
            "namespace: x\n",
            "namespace: x\nresources:\n  - new.yaml\n",
            id="missing-key",
        ),
        pytest.param(
            "resources:\n  - a.yaml",
            "resources:\n  - a.yaml\n  - new.yaml\n",
            id="no-final-newline",
        ),
        pytest.param(
            "resources:\n  - new.yaml\n",
            "resources:\n  - new.yaml\n",
            id="already-there",
        ),
        pytest.param("", "resources:\n  - new.yaml\n", id="empty-file"),
    ],
)
def test_add_list_item(text: str, expected: str) -> None:
    assert add_list_item(text, "resources", "new.yaml", source="k.yaml") == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("- a\n", "k.yaml: expected a mapping", id="not-a-mapping"),
        pytest.param("resources: a.yaml\n", "k.yaml: 'resources' is not a list", id="scalar"),
        pytest.param("resources: [a.yaml]\n", "cannot add 'new.yaml'", id="flow-list"),
        pytest.param("resources: [\n", "k.yaml: invalid YAML", id="broken"),
    ],
)
def test_add_list_item_refuses_other_shapes(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        add_list_item(text, "resources", "new.yaml", source="k.yaml")


def test_leading_comments() -> None:
    assert leading_comments("# a\n\n# b\n---\nx: 1\n# c\n") == "# a\n\n# b\n"
    assert leading_comments("x: 1\n") == ""

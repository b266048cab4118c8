"""The one YAML writer: its two styles, byte for byte."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from runner.util.yamlwriter import CANONICAL, EDITABLE, YamlStyle, dump, dump_all

DATA = {"b": ["x", ""], "a": {"n": "3", "t": "true", "s": "a\nb\n"}, "e": {}}


@pytest.mark.parametrize(
    ("style", "expected"),
    [
        pytest.param(
            EDITABLE,
            'b:\n  - x\n  - ""\na:\n  n: "3"\n  t: "true"\n  s: |\n    a\n    b\ne: {}\n',
            id="editable-keeps-order-indents-lists-quotes-ambiguous",
        ),
        pytest.param(
            CANONICAL,
            "a:\n  n: '3'\n  s: |\n    a\n    b\n  t: 'true'\nb:\n- x\n- ''\ne: {}\n",
            id="canonical-sorts-keys-lists-at-key-indentation",
        ),
    ],
)
def test_styles(style: YamlStyle, expected: str) -> None:
    assert dump(DATA, style=style) == expected
    assert yaml.safe_load(expected) == DATA


@pytest.mark.parametrize("style", [EDITABLE, CANONICAL], ids=["editable", "canonical"])
def test_never_anchors_and_never_folds(style: YamlStyle) -> None:
    shared = {"k": "v"}
    long_line = " ".join(["word"] * 800)
    text = dump({"one": shared, "two": shared, "long": long_line}, style=style)
    assert "&" not in text and "*" not in text
    assert long_line in text
    assert yaml.safe_load(text) == {"one": shared, "two": shared, "long": long_line}


def test_header_and_document_start() -> None:
    assert dump({"a": 1}, style=EDITABLE, header="first\n\nthird", start=True) == (
        "# first\n#\n# third\n---\na: 1\n"
    )


@pytest.mark.parametrize("style", [EDITABLE, CANONICAL], ids=["editable", "canonical"])
def test_dump_all_opens_every_document(style: YamlStyle) -> None:
    documents: list[Any] = [{"a": 1}, ["x"], "text"]
    text = dump_all(documents, style=style, header="h")
    assert text.startswith("# h\n---\n")
    assert text.count("---\n") == 3
    assert list(yaml.safe_load_all(text)) == documents

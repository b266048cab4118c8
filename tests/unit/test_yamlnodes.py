"""YAML node positions: the line of a field path, the field path of a line."""

from __future__ import annotations

import pytest
import yaml

from runner.errors import ConfigError
from runner.util.fields import FieldPath
from runner.util.yamlnodes import line_of, load_document, path_at

TEXT = """\
# a comment
- version: v1
  Kind: Site
  selector:
    matchLabels:
      app: web
  vars:
    - a
    - b

- version: v2
  kind: Page
  created: 2024-01-02
"""


def root() -> yaml.Node:
    node, _ = load_document(TEXT, source="w.yaml")
    assert node is not None
    return node


@pytest.mark.parametrize(
    ("path", "line"),
    [
        pytest.param((), 2, id="root"),
        pytest.param((0,), 2, id="entry"),
        pytest.param((0, "version"), 2, id="key"),
        pytest.param((0, "kind"), 3, id="key-any-case"),
        pytest.param((0, "selector", "matchLabels", "app"), 6, id="nested"),
        pytest.param((0, "vars", 1), 9, id="list-item"),
        pytest.param((0, "vars", 5), 7, id="index-out-of-range-stops-at-parent"),
        pytest.param((0, "nope", "deeper"), 2, id="missing-key-stops-at-parent"),
        pytest.param((1, "kind"), 12, id="second-entry"),
    ],
)
def test_line_of(path: FieldPath, line: int) -> None:
    assert line_of(root(), path) == line


@pytest.mark.parametrize(
    ("line", "path"),
    [
        pytest.param(1, None, id="comment-before"),
        pytest.param(3, (0, "Kind"), id="key-as-written"),
        pytest.param(6, (0, "selector", "matchLabels", "app"), id="nested"),
        pytest.param(9, (0, "vars", 1), id="list-item"),
        pytest.param(10, (0, "vars"), id="blank-line-after-a-block-belongs-to-it"),
        pytest.param(13, (1, "created"), id="last-line"),
        pytest.param(14, None, id="past-the-end"),
    ],
)
def test_path_at(line: int, path: FieldPath | None) -> None:
    assert path_at(root(), line) == path


def test_dates_stay_strings_as_in_go() -> None:
    _, data = load_document(TEXT, source="w.yaml")
    assert data[1]["created"] == "2024-01-02"


def test_empty_document() -> None:
    assert load_document("# nothing\n", source="w.yaml") == (None, None)


def test_invalid_yaml_names_file_and_position() -> None:
    with pytest.raises(ConfigError, match=r"^w\.yaml: invalid YAML at line 2, column 1: "):
        load_document("- [a\n", source="w.yaml")

"""`--max-artifacts-bytes`: sizes as bytes or with Kubernetes-style suffixes."""

from __future__ import annotations

import argparse

import pytest

from runner.cli.main import build_parser
from runner.cli.runflags import parse_size


@pytest.mark.parametrize(
    ("text", "size"),
    [
        pytest.param("0", 0, id="zero-no-limit"),
        pytest.param("1048576", 2**20, id="bytes"),
        pytest.param("500Mi", 500 * 2**20, id="mebibytes"),
        pytest.param("1Gi", 2**30, id="gibibytes"),
        pytest.param("2G", 2 * 10**9, id="gigabytes"),
        pytest.param("3k", 3000, id="lower-case"),
        pytest.param("1GiB", 2**30, id="b-suffix"),
        pytest.param(" 10Ki ", 10 * 2**10, id="spaces"),
    ],
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "Gi", "-1", "1.5Gi", "10x", "1 Gi", "1Pi"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="invalid size"):
        parse_size(text)


def test_flag_default_and_value() -> None:
    parser = build_parser()
    assert parser.parse_args(["run"]).max_artifacts_bytes == 2**30
    args = parser.parse_args(["run", "--max-artifacts-bytes=0"])
    assert args.max_artifacts_bytes == 0

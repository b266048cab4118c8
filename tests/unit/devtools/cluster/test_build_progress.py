"""How a Go build's progress is counted: `go list -deps` for the total (same flags as the
build), the package lines of `go build -v` for the packages built. A stand-in `go`
script records its arguments."""

from __future__ import annotations

import io
import os
from pathlib import Path

from runner.devtools.cluster.build import _count_packages, _run_counting

_FAKE_GO = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/calls"
if [ "$1" = list ]; then printf 'fmt\\nos\\nexample.com/a\\nexample.com/b/v2\\n'; exit 0; fi
printf 'example.com/a\\n# example.com/b/v2\\nexample.com/b/v2\\nb.go:3:1: warning text\\n'
exit 3
"""


def _fake_go(tmp_path: Path) -> str:
    go = tmp_path / "go"
    go.write_text(_FAKE_GO)
    go.chmod(0o755)
    return str(go)


def test_total_from_go_list_with_the_build_flags(tmp_path: Path) -> None:
    go = _fake_go(tmp_path)
    build = [go, "build", "-modfile=x.mod", "-tags", "a,b", "-trimpath", "-ldflags", "-s -w"]
    build += ["-o", "out/", "example.com/cmd/a", "example.com/cmd/b"]
    assert _count_packages(go, build, cwd=tmp_path, env=dict(os.environ)) == 4
    call = (tmp_path / "calls").read_text().strip()
    flags = "-modfile=x.mod -tags a,b -trimpath"
    assert call == f"list -deps {flags} example.com/cmd/a example.com/cmd/b"


def test_package_lines_are_counted_and_everything_is_logged(tmp_path: Path) -> None:
    go = _fake_go(tmp_path)
    log = io.StringIO()
    code, built = _run_counting([go, "build", "-v", "x"], tmp_path, dict(os.environ), log, "a", 4)
    assert (code, built) == (3, 2)
    assert log.getvalue().count("\n") == 4  # every line reaches the log
    # Counted: the two package lines, not the "# pkg" header nor the compiler message.
    assert "b.go:3:1: warning text" in log.getvalue()

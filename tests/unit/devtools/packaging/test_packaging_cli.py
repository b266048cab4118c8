"""`ansible-operator bundle generate|validate` and `catalog generate` end to end (no Go)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from support.bundles import GUESTBOOK_CSV, edit_yaml

from runner.cli.main import main


def _generate(project: Path, output: Path, *extra: str) -> int:
    return main(
        ["bundle", "generate", "--version", "0.1.0", "--project-dir", str(project),
         "--output-dir", str(output), *extra]
    )  # fmt: skip


def test_generate_then_validate(
    guestbook: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "out" / "bundle"
    assert (
        _generate(guestbook, output, "--channels", "stable,fast", "--image", "q.io/g:v0.1.0") == 0
    )
    assert (tmp_path / "out" / "bundle.Dockerfile").is_file()
    csv = yaml.safe_load((output / GUESTBOOK_CSV).read_text())
    assert csv["metadata"]["name"] == "guestbook-operator.v0.1.0"
    capsys.readouterr()
    assert main(["bundle", "validate", str(output), "--project-dir", str(guestbook)]) == 0
    assert "0 error(s), 0 warning(s)" in capsys.readouterr().err
    # Regenerating changes nothing.
    assert (
        _generate(guestbook, output, "--channels", "stable,fast", "--image", "q.io/g:v0.1.0") == 0
    )
    assert "is up to date" in capsys.readouterr().err


def test_validate_reports_errors_with_exit_code(
    bundle_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit_yaml(bundle_dir / GUESTBOOK_CSV, lambda d: d["spec"].pop("installModes"))
    assert main(["bundle", "validate", str(bundle_dir), "--output", "json"]) == 1
    findings = json.loads(capsys.readouterr().out)
    assert {
        "level": "error",
        "file": GUESTBOOK_CSV,
        "field": "spec.installModes",
        "message": "install modes not found",
    } in findings


def test_generate_error_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _generate(tmp_path, tmp_path / "bundle") == 1
    assert capsys.readouterr().err.startswith("error: ")


def test_catalog_generate_and_extend(bundle_dir: Path, guestbook: Path, tmp_path: Path) -> None:
    output = tmp_path / "catalog"
    assert main(["catalog", "generate", "--bundle", str(bundle_dir), "--output", str(output)]) == 0
    v2 = tmp_path / "v2" / "bundle"
    assert _generate(guestbook, v2, "--replaces", "guestbook-operator.v1.2.3") == 1  # older
    main(["bundle", "generate", "--version", "2.0.0", "--project-dir", str(guestbook),
          "--output-dir", str(v2)])  # fmt: skip
    assert (
        main(
            [
                "catalog",
                "generate",
                "--bundle",
                str(v2),
                "--from",
                str(output),
                "--output",
                str(output),
            ]
        )
        == 0
    )
    documents = list(yaml.safe_load_all((output / "guestbook-operator" / "index.yaml").read_text()))
    (channel,) = [d for d in documents if d["schema"] == "olm.channel"]
    assert channel["entries"][-1] == {
        "name": "guestbook-operator.v2.0.0",
        "replaces": "guestbook-operator.v1.2.3",
    }
    assert (tmp_path / "catalog.Dockerfile").is_file()


def test_catalog_refuses_an_invalid_bundle(
    bundle_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit_yaml(bundle_dir / GUESTBOOK_CSV, lambda d: d["spec"].pop("installModes"))
    assert (
        main(["catalog", "generate", "--bundle", str(bundle_dir), "--output", str(tmp_path / "c")])
        == 1
    )
    assert "install modes not found" in capsys.readouterr().err

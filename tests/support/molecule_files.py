"""The repository's molecule/ files that come from the scaffold's renderers.

molecule/shared/ and the two scenarios' molecule.yml are what `init` and `create api`
write into every project (for memcached-operator); each scenario's vars.yml and verify.yml
are the sample's own. After changing a renderer, rewrite the repository's copies with:

    .venv/bin/python tests/support/molecule_files.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from runner.devtools.scaffold.molecule.perkind import shared_files
from runner.devtools.scaffold.molecule.scenarioruns import scenario_config

REPO = Path(__file__).resolve().parents[2]
PROJECT = "memcached-operator"


def expected_files() -> dict[str, str]:
    return {
        **shared_files(PROJECT),
        "molecule/default/molecule.yml": scenario_config("operator"),
        "molecule/role/molecule.yml": scenario_config("role"),
    }


def main() -> int:
    for path, text in sorted(expected_files().items()):
        target = REPO / path
        if target.is_file() and target.read_text(encoding="utf-8") == text:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

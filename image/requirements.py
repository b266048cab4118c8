"""Print the runtime image's Python requirements, one per line.

`python requirements.py <pyproject.toml> <ansible-core line>`: the package's dependencies
from pyproject.toml, with ansible-core on the given line (e.g. 2.18) and without the
`ansible` distribution, whose ~100 collections the image does not ship (collections.py
copies the few it needs).
"""

import re
import sys
import tomllib
from pathlib import Path

LEFT_OUT = {"ansible", "ansible-core"}


def requirements(pyproject: Path, core_line: str) -> list[str]:
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    kept = []
    for requirement in dependencies:
        name = re.match(r"[A-Za-z0-9._-]+", requirement)
        if name is None:
            sys.exit(f"{pyproject}: project.dependencies: cannot read {requirement!r}")
        if name[0].lower().replace("_", "-") not in LEFT_OUT:
            kept.append(requirement)
    return [f"ansible-core=={core_line}.*", *kept]


if __name__ == "__main__":
    print("\n".join(requirements(Path(sys.argv[1]), sys.argv[2])))

"""Extract the collections listed in collections.txt from the `ansible` distribution.

Run inside the image build: `python select_collections.py <ansible-core line> <target>` downloads
the wheel of the `ansible` release that goes with that ansible-core line (without its
dependencies) and unpacks only the listed collections below <target>/ansible_collections.
"""

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# The `ansible` release whose collections the image ships, per ansible-core line.
ANSIBLE_FOR_CORE = {"2.18": "11.13.0", "2.19": "12.3.0"}


def wanted(listing: Path) -> list[tuple[str, bool]]:
    """(collection, required) for each name listed; `name?` is optional."""
    lines = (line.split("#")[0].strip() for line in listing.read_text().splitlines())
    return [(line.rstrip("?"), not line.endswith("?")) for line in lines if line]


def main(core_line: str, target: Path) -> None:
    if core_line not in ANSIBLE_FOR_CORE:
        sys.exit(f"ANSIBLE_CORE={core_line}: not one of {', '.join(ANSIBLE_FOR_CORE)}")
    names = wanted(Path(__file__).with_name("collections.txt"))
    prefixes = tuple("ansible_collections/" + name.replace(".", "/") + "/" for name, _ in names)
    with tempfile.TemporaryDirectory() as download:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-cache-dir",
                "--dest",
                download,
                f"ansible=={ANSIBLE_FOR_CORE[core_line]}",
            ],
            check=True,
        )
        (wheel,) = Path(download).glob("ansible-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            members = [m for m in archive.namelist() if m.startswith(prefixes)]
            archive.extractall(target, members)
    for prefix, (name, required) in zip(prefixes, names, strict=True):
        if required and not (target / prefix / "MANIFEST.json").is_file():
            sys.exit(f"collections.txt: {name} is not in ansible {ANSIBLE_FOR_CORE[core_line]}")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))

"""README.md stays a five-minute read for a newcomer, and its links into the repository
(docs/, DEVELOPMENT.md, CONTRIBUTING.md) lead somewhere. The guides it links to are held to
the same: a renamed page or heading breaks this test, not a reader's click."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
MAX_LINES = 150
GUIDES = ("README.md", "DEVELOPMENT.md", "CONTRIBUTING.md", "docs/projects.md")

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^(```|~~~)")


def _outside_code(text: str) -> list[str]:
    """The lines of a Markdown text that are not in fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def links(path: Path) -> list[str]:
    """The targets of the Markdown links of `path` (outside code blocks)."""
    return [found for line in _outside_code(path.read_text()) for found in _LINK.findall(line)]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to -."""
    text = re.sub(r"[`*_]", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    for line in _outside_code(path.read_text()):
        heading = _HEADING.match(line)
        if heading:
            found.add(slug(heading[1]))
    return found


def test_readme_is_at_most_150_lines() -> None:
    assert len(README.read_text().splitlines()) <= MAX_LINES


def test_readme_links_into_docs() -> None:
    targets = {link.partition("#")[0] for link in links(README)}
    docs = {target for target in targets if target.startswith("docs/")}
    assert len(docs) >= 10, sorted(targets)
    assert {"DEVELOPMENT.md", "CONTRIBUTING.md", "docs/architecture.md"} <= targets


@pytest.mark.parametrize("guide", GUIDES)
def test_every_link_into_the_repository_resolves(guide: str) -> None:
    source = REPO / guide
    broken = []
    for link in links(source):
        if re.match(r"[a-z]+:", link):
            continue  # https:, mailto:: not ours to check offline
        target, _, anchor = link.partition("#")
        path = (source.parent / target).resolve() if target else source
        if not path.exists():
            broken.append(f"{link}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{link}: no heading with that anchor")
    assert broken == []


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        pytest.param("## The two `ansible-core` lines", "the-two-ansible-core-lines", id="code"),
        pytest.param("### 1. Watch event → key", "1-watch-event--key", id="arrow"),
        pytest.param("## Adding a hook spot", "adding-a-hook-spot", id="plain"),
    ],
)
def test_slug(heading: str, anchor: str) -> None:
    assert slug(_HEADING.match(heading)[1]) == anchor  # type: ignore[index]


def test_a_broken_link_is_seen(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[a](missing.md) [b](#title) [c](#nowhere)\n```\n[d](x.md)\n```\n")
    assert links(page) == ["missing.md", "#title", "#nowhere"]
    assert anchors(page) == {"title"}

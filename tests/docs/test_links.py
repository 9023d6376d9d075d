"""Every relative link of README.md and docs/ reaches a file, and its anchor a heading."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import BASE_DIR

PAGES = [BASE_DIR / "README.md", *sorted((BASE_DIR / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def prose(path: Path) -> str:
    """The page without its fenced code blocks (a `#` there is no heading)."""
    return re.sub(r"^```.*?^```$", "", path.read_text(), flags=re.S | re.M)


def anchors(path: Path) -> set[str]:
    """GitHub's anchors for the page's headings."""
    found = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *$", prose(path), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        found.add(slug)
    return found


def links(path: Path) -> list[str]:
    text = re.sub(r"`[^`\n]*`", "", prose(path))
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(BASE_DIR)))
def test_every_relative_link_reaches_its_file_and_heading(page: Path) -> None:
    broken = []
    for target in links(page):
        file_part, _, anchor = target.partition("#")
        reached = (page.parent / file_part).resolve() if file_part else page
        if not reached.exists():
            broken.append(f"{target}: no file {reached}")
        elif anchor and reached.suffix == ".md" and anchor not in anchors(reached):
            broken.append(f"{target}: no heading #{anchor} in {reached.name}")
    assert broken == []


def test_the_pages_link_to_one_another() -> None:
    assert sum(len(links(page)) for page in PAGES) > 20

"""The docs stay short enough to read in one sitting, and every link in them
leads somewhere: a file of the repository, and a heading of it when the link
names one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _words(path: Path) -> int:
    return len(path.read_text().split())


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped,
    spaces as hyphens."""
    anchors = set()
    for line in page.read_text().splitlines():
        if heading := re.match(r"^#{1,6}\s+(.*)$", line):
            text = heading.group(1).strip().lower()
            text = re.sub(r"[^\w\- ]", "", text)
            anchors.add(text.replace(" ", "-"))
    return anchors


def test_readme_and_docs_are_short() -> None:
    assert _words(REPO / "README.md") <= 700
    assert sum(_words(p) for p in (REPO / "docs").glob("*.md")) <= 8150


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_leads_to_a_file_and_heading_there(page: Path) -> None:
    for target in LINK.findall(page.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name} links to {target}, which is not there"
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked), f"{page.name} links to {target}: no such heading"

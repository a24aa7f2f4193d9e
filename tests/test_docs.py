"""The README and the manual in docs/ hold together: every relative link points to a file, every
anchor names a heading of its page (slugged as GitHub does), and the README stays a front page."""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parent.parent
README_MAX_LINES = 300

_md = MarkdownIt("commonmark").enable("table")


def markdown_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _inline_text(token) -> str:
    """A heading's text as rendered: code spans keep their content, markup characters go."""
    return "".join(child.content for child in token.children or [] if child.type in ("text", "code_inline"))


def github_slug(text: str) -> str:
    """GitHub's heading anchor: lowercase, punctuation dropped except `-` and `_`, spaces to `-`."""
    kept = []
    for char in text.strip().lower():
        category = unicodedata.category(char)
        if char in "-_" or category[0] in "LN" or category == "Mn":
            kept.append(char)
        elif char == " ":
            kept.append("-")
    return "".join(kept)


@cache
def anchors(path: Path) -> frozenset[str]:
    """The anchors of a Markdown file's headings; a repeated heading gets `-1`, `-2`, ..."""
    tokens = _md.parse(path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    found = set()
    for opening, inline in zip(tokens, tokens[1:], strict=False):
        if opening.type != "heading_open":
            continue
        slug = github_slug(_inline_text(inline))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(found)


def links(path: Path) -> list[str]:
    """Every link and image target in a Markdown file, in order."""
    found = []

    def walk(tokens) -> None:
        for token in tokens:
            if token.type == "link_open":
                found.append(token.attrGet("href"))
            elif token.type == "image":
                found.append(token.attrGet("src"))
            if token.children:
                walk(token.children)

    walk(_md.parse(path.read_text(encoding="utf-8")))
    return found


def relative_links(path: Path) -> list[tuple[str, Path, str]]:
    """(link, the file it points to, its anchor) for each link that is not to another site."""
    out = []
    for href in links(path):
        parts = urlsplit(href)
        if parts.scheme or href.startswith("//"):  # http(s), mailto, ...
            continue
        target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
        out.append((href, target, unquote(parts.fragment)))
    return out


def broken_file_links(path: Path, root: Path = REPO) -> list[str]:
    return [f"{path.relative_to(root)}: {href}" for href, target, _ in relative_links(path) if not target.exists()]


def broken_anchors(path: Path, root: Path = REPO) -> list[str]:
    broken = []
    for href, target, anchor in relative_links(path):
        if not anchor or not target.is_file():
            continue
        if target.suffix != ".md":
            broken.append(f"{path.relative_to(root)}: {href} (an anchor into a file that is not Markdown)")
        elif anchor not in anchors(target):
            broken.append(f"{path.relative_to(root)}: {href} (no such heading in {target.relative_to(root)})")
    return broken


def test_the_docs_folder_has_a_table_of_contents_that_the_readme_links_to():
    assert (REPO / "docs" / "index.md").is_file()
    assert any(target == REPO / "docs" / "index.md" for _, target, _ in relative_links(REPO / "README.md"))


def test_every_relative_link_in_the_docs_points_to_a_file():
    broken = [line for path in markdown_files() for line in broken_file_links(path)]
    assert not broken, "\n".join(broken)


def test_every_anchor_in_the_docs_names_a_heading():
    broken = [line for path in markdown_files() for line in broken_anchors(path)]
    assert not broken, "\n".join(broken)


def test_every_docs_page_is_reachable_from_the_table_of_contents():
    listed = {target for _, target, _ in relative_links(REPO / "docs" / "index.md")}
    pages = {path.resolve() for path in (REPO / "docs").glob("*.md")} - {(REPO / "docs" / "index.md").resolve()}
    assert not pages - listed, sorted(str(p.relative_to(REPO)) for p in pages - listed)


def test_the_readme_is_a_front_page_of_at_most_300_lines():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move the detail into docs/"


def test_headings_are_slugged_as_github_does(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# The report (`schema_version` 1.8)\n\n## `--redact`: a report for a public ticket\n\n"
        "## The terminal UI on a 5,000-site report\n\n## Options\n\n### Options\n\n## Options\n"
    )
    assert anchors(page) == {
        "the-report-schema_version-18",
        "--redact-a-report-for-a-public-ticket",
        "the-terminal-ui-on-a-5000-site-report",
        "options",
        "options-1",
        "options-2",
    }


def test_a_broken_link_or_anchor_is_reported(tmp_path):
    (tmp_path / "other.md").write_text("# Other page\n\n## A section\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[fine](other.md#a-section), [here](#page), [site](https://example.com/x#y),\n"
        "[gone](missing.md), [no heading](other.md#nowhere), [nor here](#nowhere)\n"
    )
    assert [line.split(": ", 1)[1] for line in broken_file_links(page, tmp_path)] == ["missing.md"]
    assert [line.split(": ", 1)[1].split(" ")[0] for line in broken_anchors(page, tmp_path)] == [
        "other.md#nowhere",
        "#nowhere",
    ]


def test_no_markdown_link_is_left_unrendered_by_a_typo():
    # `[text] (target)` or `[text](target` renders as plain text and would escape the checks above
    for path in markdown_files():
        text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
        assert not re.search(r"\]\s+\((?:\.\.?/|[\w-]+\.md|#)", text), path

"""Every ``python`` and ``bash`` block of the README and the docs runs as written (tests/docs/_blocks.py
has the rules), or says why not with ``<!-- not-run: REASON -->``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs._blocks import ROOT, Block, DocsError, Page, expect_lines, pages, parse

pytestmark = pytest.mark.timeout(600)

TUTORIAL = ROOT / "docs" / "tutorial.md"  # tests/docs/test_tutorial.py runs it, with more checks


def _id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_every_page_follows_the_block_rules() -> None:
    """Directives sit right before a block, not-run has a reason, output follows a block."""
    problems = []
    for page in pages():
        try:
            parse(page)
        except DocsError as exc:
            problems.append(str(exc))
    assert problems == []


def test_the_rules_find_what_they_must() -> None:
    """The parser sees a page's blocks (indented ones too) and their directives."""
    blocks = parse(ROOT / "docs" / "contracts.md")
    assert sum(b.runs and b.language == "python" for b in blocks) >= 5
    assert [b.directive for b in blocks if b.language == "text"].count("output") == 2


def test_output_lines_match_in_order_with_wildcards() -> None:
    expect_lines("a ... c\n\nx   y\n", "zero\na b c\nx y\n", "here")
    with pytest.raises(DocsError):
        expect_lines("x y\na ... c\n", "a b c\nx y\n", "here")


def _runnable(path: Path) -> list[Block]:
    return [b for b in parse(path) if b.runs]


@pytest.mark.slow
@pytest.mark.parametrize("path", [p for p in pages() if _runnable(p) and p != TUTORIAL], ids=_id)
def test_the_page_runs_as_written(path: Path, tmp_path: Path) -> None:
    ran = Page(path, tmp_path).run()
    assert ran == _runnable(path)

"""The documentation site builds with warnings as errors, and its generated reference is whole."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs._blocks import ROOT, load_script

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

docs_hooks = load_script(ROOT / "scripts" / "docs_hooks.py")


def test_the_site_builds_strict(built_site: tuple[Path, float, str]) -> None:
    site, _, output = built_site
    assert "WARNING" not in output
    pages = {p.relative_to(site).as_posix() for p in site.rglob("*.html")}
    assert {"index.html", "tutorial.html", "reference/cli.html", "benchmarks.html", "contracts.html"} <= pages
    assert (site / "search" / "search_index.json").stat().st_size > 10_000


def test_every_page_is_in_the_navigation() -> None:
    """A page missing from mkdocs.yml's nav would be built but never found."""
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert {page for page in pages if f": {page}" not in nav} == set()


def test_the_reference_names_every_command_and_variable(built_site: tuple[Path, float, str]) -> None:
    site, _, _ = built_site
    cli = (site / "reference" / "cli.html").read_text()
    for command in (
        "gear serve",
        "gear broker",
        "gear send stateless",
        "gear traces analyze",
        "gear contract diff",
    ):
        assert f"{command} --help" in cli
    settings = (site / "reference" / "settings.html").read_text()
    used = set()
    for path in (ROOT / "gear").rglob("*.py"):
        used |= set(re.findall(r"\b(GEAR_[A-Z][A-Z0-9_]*[A-Z0-9])\b", path.read_text()))
    assert {name for name in used if name not in settings} == set()
    errors = (site / "reference" / "errors.html").read_text()
    for code in ("130", "DeliveryLimitError", "PayloadTooLargeError", "BREAKING"):
        assert code in errors


def test_the_generators_render_without_a_build() -> None:
    """The hook replaces what lies between the markers only, and a misspelt or unclosed marker fails
    the build."""
    text = docs_hooks.render("before\n<!-- gen:exit-codes -->\nold\n<!-- /gen:exit-codes -->\nafter\n")
    assert text.startswith("before\n<!-- gen:exit-codes -->\n| code | name | meaning |")
    assert text.endswith("\n<!-- /gen:exit-codes -->\nafter\n")
    assert "| 11 | `BREAKING` |" in text
    assert "old" not in text
    with pytest.raises(KeyError):
        docs_hooks.render("<!-- gen:nothing -->\n<!-- /gen:nothing -->\n")
    with pytest.raises(ValueError, match="exit-codes without"):
        docs_hooks.render("<!-- gen:exit-codes -->\n")


def test_the_404_page_links_relative_to_the_site(built_site: tuple[Path, float, str]) -> None:
    """Root-absolute links (``/assets/...``) break wherever the site is not at a domain's root."""
    page = (built_site[0] / "404.html").read_text()
    assert re.findall(r'(?:href|src|action)="/[^"]*"', page) == []
    assert 'href="assets/stylesheets/' in page


def test_no_list_is_swallowed_by_a_paragraph(built_site: tuple[Path, float, str]) -> None:
    """A list item that Markdown took for the rest of a paragraph shows its ``- `` as text (clusters.md
    did, after a code block inside an item)."""
    swallowed = {
        page.relative_to(built_site[0]).as_posix(): found
        for page in built_site[0].rglob("*.html")
        if (found := re.findall(r"<p>[^<]*(?:<(?!/p>)[^<]*)*\n- <strong>", page.read_text()))
    }
    assert swallowed == {}


def test_api_signatures_are_formatted_to_fit(built_site: tuple[Path, float, str]) -> None:
    """With a formatter (ruff, in the docs extra) signatures are laid out one parameter per line within
    80 columns; without one, mkdocstrings writes each on one line of up to 209 characters."""
    import html

    page = (built_site[0] / "reference" / "api.html").read_text()
    signatures = [
        html.unescape(re.sub(r"<[^>]+>", "", found))
        for found in re.findall(r'<div class="doc-signature highlight"><pre>(.*?)</pre>', page, re.S)
    ]
    assert len(signatures) > 50
    assert max(len(line) for text in signatures for line in text.splitlines()) <= 80
    service = next(text for text in signatures if text.startswith("Service("))
    assert "\n    url: str | Sequence[str] | None = None,\n" in service

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
    """The hook replaces marker lines only, and a misspelt marker fails the build."""
    text = docs_hooks.render("before\n<!-- gen:exit-codes -->\nafter\n")
    assert text.startswith("before\n| code | name | meaning |")
    assert text.endswith("\nafter\n")
    assert "| 11 | `BREAKING` |" in text
    with pytest.raises(KeyError):
        docs_hooks.render("<!-- gen:nothing -->\n")

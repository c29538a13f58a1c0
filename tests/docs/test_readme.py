"""The README fits on a screen, keeps the two commands CI and newcomers run, and links into the docs."""

from __future__ import annotations

import re

from tests.docs._blocks import ROOT

README = ROOT / "README.md"
TEST_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest"
"""The test command, as .ci/run runs it verbatim."""
DEMO_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/gear demo"


def test_the_readme_is_short_and_keeps_its_commands() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 150
    assert TEST_COMMAND in text.splitlines()
    assert DEMO_COMMAND in text.splitlines()
    assert TEST_COMMAND in (ROOT / ".ci" / "run").read_text()


def test_the_readme_links_point_at_files_that_exist() -> None:
    links = re.findall(r"\]\((?!https?://)([^)#]+)(?:#[^)]*)?\)", README.read_text())
    assert len(links) >= 20
    assert [link for link in links if not (ROOT / link).is_file()] == []

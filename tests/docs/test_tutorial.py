"""The tutorial followed line by line: a broker, a service in two instances, calls from the shell and
from Python, and its own test, every command as the page writes it (tests/docs/_blocks.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs._blocks import ROOT, Page, parse

TUTORIAL = ROOT / "docs" / "tutorial.md"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_the_tutorial_runs_line_by_line(tmp_path: Path) -> None:
    blocks = parse(TUTORIAL)
    skipped = [b for b in blocks if b.language in ("python", "bash") and not b.runs]
    assert [b.body.split()[0] for b in skipped] == ["python3"], "only the install step may be skipped"
    ran = Page(TUTORIAL, tmp_path).run()
    assert ran == [b for b in blocks if b.runs]
    assert {"service.py", "client.py", "test_service.py"} <= {p.name for p in tmp_path.iterdir()}
    commands = " ".join(b.body for b in ran if b.language == "bash")
    for step in ("gear broker", "gear serve", "gear call", "gear gather", "gear nodes", "python client.py"):
        assert step in commands

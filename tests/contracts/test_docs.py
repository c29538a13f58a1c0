"""docs/contracts.md stays true: its Python blocks, in order, are one program that runs against the
reference broker and prints exactly the blocks marked ``<!-- output -->``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "contracts.md"
_BLOCK = re.compile(r"(<!-- output[^>]*-->\n)?```(\w+)\n(.*?)```", re.S)


@pytest.mark.slow
def test_the_contracts_page_runs_and_prints_what_it_says(tmp_path: Path) -> None:
    program, printed = [], []
    for output, language, body in _BLOCK.findall(PAGE.read_text()):
        if language == "python":
            program.append(body)
        elif output:
            printed.append(body)
    assert len(program) >= 5
    assert len(printed) == 2
    script = tmp_path / "contracts_page.py"
    script.write_text("\n".join(program))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == "".join(printed).splitlines()

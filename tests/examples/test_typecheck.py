"""What type checkers see of calls must hold: ``tests/calling/typed_calls.py`` passes ``mypy --strict``. (The
examples and the CLI, ``gear.examples`` and ``gear.cli``, are checked strictly with the rest of ``gear/`` in
tests/test_habits.py.)"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.xdist_group("mypy")  # mypy runs share .mypy_cache: one at a time
@pytest.mark.slow
def test_typed_calls_pass_mypy_strict() -> None:
    if (
        shutil.which("mypy") is None
        and subprocess.run([sys.executable, "-m", "mypy", "--version"], capture_output=True).returncode != 0
    ):
        pytest.skip("mypy is not installed (pip install -e '.[test]')")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "tests/calling/typed_calls.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr

"""The examples are code people copy: they must pass ``mypy --strict`` (and so must the CLI, and the
typed-call checks in ``tests/sdk/typed_calls.py``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_examples_and_cli_pass_mypy_strict() -> None:
    if (
        shutil.which("mypy") is None
        and subprocess.run([sys.executable, "-m", "mypy", "--version"], capture_output=True).returncode != 0
    ):
        pytest.skip("mypy is not installed (pip install -e '.[test]')")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "examples", "cli", "tests/sdk/typed_calls.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr

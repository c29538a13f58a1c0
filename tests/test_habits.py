"""The habits CI enforces through the test command: ruff (lint and format) on the whole tree, ``mypy``
strict on ``gear/`` and checked (with the relaxed settings in pyproject.toml) on ``tests/`` and
``benchmarks/``. The examples and the CLI pass ``mypy --strict`` in tests/examples/test_typecheck.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    if subprocess.run([sys.executable, "-m", tool, "--version"], capture_output=True).returncode != 0:
        pytest.skip(f"{tool} is not installed (pip install -e '.[test]')")
    return subprocess.run(
        [sys.executable, "-m", tool, *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_ruff_check_is_clean() -> None:
    done = _run("ruff", "check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_leaves_the_tree_unchanged() -> None:
    done = _run("ruff", "format", "--check", ".")
    assert done.returncode == 0, "run `ruff format .`:\n" + done.stdout + done.stderr


@pytest.mark.xdist_group("mypy")  # mypy runs share .mypy_cache: one at a time
@pytest.mark.slow
@pytest.mark.parametrize(
    "paths", [("gear",), ("tests", "benchmarks")], ids=["gear-strict", "tests-benchmarks"]
)
def test_mypy_is_clean(paths: tuple[str, ...]) -> None:
    done = _run("mypy", *paths)
    assert done.returncode == 0, done.stdout + done.stderr

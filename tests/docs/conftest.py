"""The built site, once per session: ``mkdocs build --strict`` into a temporary folder."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.docs._blocks import ROOT


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float, str]:
    """``(site folder, seconds the build took, its output)``; skips without the docs extra."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None:
        pytest.skip("MkDocs is not installed: pip install -e '.[docs]' (the test extra has it)")
    site = tmp_path_factory.mktemp("site")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return site, time.monotonic() - started, done.stdout + done.stderr

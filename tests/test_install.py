"""What a user's type checker sees of Gear (issue 40): an editable install (``pip install -e .``) is a
plain path entry that mypy follows, and Gear's own source passes a user's ``mypy --strict`` without
Gear's configuration (no pydantic plugin), as it does when mypy reads it from the checkout."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# mypy is CPU-heavy: with the habits' mypy runs, one at a time (each run has its own cache here)
pytestmark = [pytest.mark.xdist_group("mypy"), pytest.mark.timeout(300)]


def _mypy(tmp_path: Path, source: str, env: dict[str, str] | None = None) -> str:
    """``mypy --strict`` on ``source`` as a user's module, run where the checkout is not the working
    directory, with an empty configuration of the user's own; its output."""
    (tmp_path / "user_code.py").write_text(source)
    (tmp_path / "mypy.ini").write_text("[mypy]\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--config-file",
            "mypy.ini",
            "--cache-dir",
            ".cache",
            "user_code.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )
    return done.stdout + done.stderr


def _editable() -> bool:
    """True when gear-rpc is installed in editable mode (the checkout's own ``gear_rpc.egg-info`` may be
    found first: every distribution of that name is asked)."""
    for found in metadata.distributions(name="gear-rpc"):
        direct = json.loads(found.read_text("direct_url.json") or "{}")
        if direct.get("dir_info", {}).get("editable"):
            return True
    return False


@pytest.mark.skipif(
    not _editable(), reason="gear-rpc is not installed in editable mode here (pip install -e .)"
)
def test_a_users_mypy_sees_the_editable_install(tmp_path: Path) -> None:
    out = _mypy(tmp_path, 'import gear\n\nwrong: int = gear.Service("A")\n')
    assert "import-not-found" not in out, out
    assert 'Incompatible types in assignment (expression has type "Service", variable has type "int")' in out


def test_gears_source_passes_a_users_strict_mypy_without_gears_config(tmp_path: Path) -> None:
    """MYPYPATH puts a copy of the source first (the checkout itself may be on the path of the editable
    install, whose modules mypy silences), so mypy checks Gear's own modules with the user's settings:
    no pydantic plugin, strict. (Before the trace models spelled their aliases out, it found 33 errors.)"""
    shutil.copytree(ROOT / "gear", tmp_path / "source" / "gear", ignore=shutil.ignore_patterns("__pycache__"))
    packages = ["gear", "gear.broker", "gear.contract", "gear.testing", "gear.tracing", "gear.metrics"]
    if importlib.util.find_spec("pyspark") is not None:  # the CLI imports gear.pipeline, which needs it
        packages.append("gear.cli.main")
    source = "".join(f"import {name}\n" for name in packages)
    out = _mypy(tmp_path, source, {"MYPYPATH": str(tmp_path / "source")})
    assert out.strip().endswith("Success: no issues found in 1 source file"), out

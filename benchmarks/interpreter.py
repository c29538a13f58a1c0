"""The CPython that runs Gear in a benchmark, and the one Gear's image runs, to compare the two.

How a CPython was built can change Gear's figures: a build with profile-guided and link-time
optimization and the interpreter linked statically (the official ``python`` images, Debian's
``python3``, uv's standalone builds) may run the same code in less CPU than a build with default
flags and a shared ``libpython`` (what ``pyenv install`` makes unless told otherwise); the
benchmarks that use this module measure by how much, one call at a time and with many in flight.
Gear's image (``Dockerfile``) runs its base image's CPython: ``python:3.11-slim``'s, or Debian's where
``scripts/debian_images.py`` builds the base. :func:`image_python` gives a virtual
environment on Debian's ``python3`` (or another interpreter) with this checkout installed in it,
so a benchmark can run Gear's processes on it beside the interpreter it was started with.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import gobench

__all__ = ("IMAGE_PYTHON", "describe", "image_python")

IMAGE_PYTHON = "/usr/bin/python3"
"""Debian's CPython: the one Gear's image runs where its base is built from Debian's packages."""
_ROOT = Path(__file__).resolve().parent.parent


def describe(python: str) -> str:
    """``CPython 3.11.2 (/usr/bin/python3.11)``: the version of ``python`` and its real path (a
    virtual environment's ``python`` is a link to the interpreter it was made from)."""
    probe = "import platform; print(platform.python_implementation(), platform.python_version())"
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=False, timeout=60)
    return f"{done.stdout.strip() or 'an unknown Python'} ({os.path.realpath(python)})"


def image_python(base: str = IMAGE_PYTHON) -> tuple[Path | None, str]:
    """The Python of a virtual environment on ``base`` with this checkout installed in it (editable,
    with the ``bench`` extra), or ``(None, why not)``. Built once and kept under the benchmarks'
    cache, by the interpreter and a hash of ``pyproject.toml``; a change to ``gear/`` needs no rebuild.
    """
    found = shutil.which(base)
    if found is None:
        return None, f"no {base} (apt-get install python3 python3-venv)"
    real = os.path.realpath(found)
    if real == os.path.realpath(sys.executable):
        return None, f"{base} is the interpreter this benchmark runs on"
    digest = hashlib.sha256(real.encode() + (_ROOT / "pyproject.toml").read_bytes()).hexdigest()[:12]
    target = gobench.CACHE / f"venv-{digest}"
    python = target / "bin" / "python"
    if (target / "ok").exists():
        return python, ""
    shutil.rmtree(target, ignore_errors=True)
    print(f"installing Gear into a virtual environment on {real}...", file=sys.stderr, flush=True)
    made = subprocess.run([real, "-m", "venv", str(target)], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        return None, f"{real} -m venv failed (apt-get install python3-venv): {made.stderr.strip()[-200:]}"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "-e", f"{_ROOT}[bench]"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if installed.returncode != 0:
        return None, f"installing Gear on {real} failed: {installed.stderr.strip()[-300:]}"
    (target / "ok").touch()
    return python, ""

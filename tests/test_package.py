"""Package hygiene: every module says what it exports, and the SDK stays light."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

import gear


def _modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(gear.__path__, prefix="gear."):
        if info.name.endswith("__main__"):
            continue
        names.append(info.name)
    return sorted(names)


@pytest.mark.parametrize("module_name", _modules())
def test_every_module_declares_an_accurate_all(module_name: str) -> None:
    module = importlib.import_module(module_name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{module_name} has no __all__"
    missing = [name for name in exported if not hasattr(module, name)]
    assert not missing, f"{module_name}.__all__ names what it lacks: {missing}"


def test_facade_all_is_sorted() -> None:
    assert list(gear.__all__) == sorted(gear.__all__)


def test_importing_the_sdk_pulls_neither_the_broker_nor_spark() -> None:
    code = (
        "import sys, gear; "
        "bad = [m for m in ('gear.broker', 'gear.pipeline', 'pyspark') if m in sys.modules]; "
        "print(','.join(bad))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "", f"`import gear` imported {done.stdout.strip()}"

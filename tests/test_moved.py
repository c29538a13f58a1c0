"""Old module paths (before the re-layout of issue 38) keep importing for one release, with a warning."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import gear  # installs the finder of old paths
from gear._moved import MOVED


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_an_old_path_imports_the_new_module_and_warns(
    old: str, new: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, old, raising=False)
    current = importlib.import_module(new)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old)
    assert module is current
    assert sys.modules[old] is current
    assert module.__name__ == new
    assert module.__spec__ is not None
    assert module.__spec__.name == new


def test_names_read_through_an_old_path_are_the_same_objects() -> None:
    code = (
        "import warnings; warnings.simplefilter('error'); import gear.calling.rpc; "
        "warnings.simplefilter('ignore'); import gear.rpc; "
        "assert gear.rpc.RPC is gear.calling.rpc.RPC; "
        "from gear.rpc import RPC; assert RPC is gear.calling.rpc.RPC; "
        "from gear import sync; import gear.calling.sync as new; assert sync is new; "
        "from gear.broker import channel; import gear.broker.protocol.channel as new; assert channel is new"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_an_old_path_warns_in_a_fresh_interpreter() -> None:
    code = "import warnings; warnings.simplefilter('error'); import gear.rpc"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0
    assert "DeprecationWarning: gear.rpc moved to gear.calling.rpc" in done.stderr


@pytest.mark.parametrize("name", ["gear.no_such_module", "gear.broker.no_such_module", "gear.calling.rpx"])
def test_an_unknown_name_still_raises_module_not_found(name: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(name)


def test_every_new_path_exists_and_no_old_path_has_a_file() -> None:
    root = Path(gear.__file__).parent.parent
    for old, new in MOVED.items():
        assert (root / f"{new.replace('.', '/')}.py").is_file(), new
        assert not (root / f"{old.replace('.', '/')}.py").exists(), f"{old} still has a module of its own"

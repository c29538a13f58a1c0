"""What mypy says about proxies: correct calls pass ``--strict`` with the declared types, and each misuse
is refused with the expected message (a wrong or missing payload, an unknown method, a result used as
another type, an unknown keyword, a gather or blocking call with the wrong payload)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

MODULE = """
from __future__ import annotations

from typing import assert_type

import gear
from gear.examples.contracts import Ctrl, Instance, Repo
from gear.examples.models import InstanceStatus, Item, ItemFound, ItemQuery, Refresh, StatusQuery, Stored


async def fine(svc: gear.Service) -> None:
    repo = svc.proxy(Repo, "REPO.repo1", timeout=2)
    assert_type(repo, Repo)
    assert_type(await repo.get(ItemQuery(key="a")), ItemFound)
    assert_type(await repo.put(Item(key="a", value="b")), Stored)
    assert_type(await gear.with_timeout(repo, 0.5).get(ItemQuery(key="a")), ItemFound)
    await svc.proxy(Instance, "*.*").refresh(Refresh())
    answers = await gear.gather(svc.proxy(Ctrl, "CTRL.*").status, StatusQuery(), expected=2)
    assert_type(answers, list[gear.Answer[InstanceStatus]])
    assert_type(answers[0].value(), InstanceStatus)
    assert_type(gear.call_sync(repo.get, ItemQuery(key="a")), ItemFound)
    every = svc.proxy(Repo, "REPO.*")
    assert_type(gear.gather_sync(every.get, ItemQuery(key="a")), list[gear.Answer[ItemFound]])
    await gear.call_with_callback(repo.get, ItemQuery(key="a"), callback=print)


async def misuse(svc: gear.Service) -> None:
    repo = svc.proxy(Repo, "REPO.repo1")
    everyone = svc.proxy(Instance, "*.*")
    await repo.get({"key": "a"})  # E: dict
    await repo.get(Item(key="a", value="b"))  # E: other model
    await repo.get()  # E: no payload
    await repo.get(ItemQuery(key="a"), timeout=2)  # E: keyword
    stored: Stored = await repo.get(ItemQuery(key="a"))  # E: result
    await repo.delete(ItemQuery(key="a"))  # E: method
    (await repo.get(ItemQuery(key="a"))).nope  # E: field
    await svc.proxy(Ctrl, "CTRL").lookup("a")  # E: str
    await gear.gather(everyone.status, ItemQuery(key="a"))  # E: gather
    n: int = (await gear.gather(everyone.status, StatusQuery()))[0].value()  # E: answer
    gear.call_sync(repo.get, StatusQuery())  # E: call_sync
    gear.with_timeout(repo, "2")  # E: timeout
    repo = svc.proxy(Ctrl, "CTRL")  # E: contract
"""

EXPECTED = {
    "dict": 'Argument 1 to "get" of "Repo" has incompatible type "dict[str, str]"; expected "ItemQuery"',
    "other model": 'Argument 1 to "get" of "Repo" has incompatible type "Item"; expected "ItemQuery"',
    "no payload": 'Missing positional argument "query" in call to "get" of "Repo"',
    "keyword": 'Unexpected keyword argument "timeout" for "get" of "Repo"',
    "result": "Incompatible types in assignment "
    '(expression has type "ItemFound", variable has type "Stored")',
    "method": '"Repo" has no attribute "delete"',
    "field": '"ItemFound" has no attribute "nope"',
    "str": 'Argument 1 to "lookup" of "Ctrl" has incompatible type "str"; expected "ItemQuery"',
    "gather": 'Argument 1 to "gather" has incompatible type "Callable[[StatusQuery], Coroutine[Any, Any, '
    'InstanceStatus]]"; expected "Callable[[ItemQuery], Awaitable[InstanceStatus]]"',
    "answer": "Incompatible types in assignment "
    '(expression has type "InstanceStatus", variable has type "int")',
    "call_sync": 'Argument 1 to "call_sync" has incompatible type "Callable[[ItemQuery], Coroutine[Any, Any, '
    'ItemFound]]"; expected "Callable[[StatusQuery], Awaitable[ItemFound]]"',
    "timeout": 'Argument 2 to "with_timeout" has incompatible type "str"; expected "float"',
    "contract": 'Incompatible types in assignment (expression has type "Ctrl", variable has type "Repo")',
}
"""What mypy says at each line of ``MODULE`` marked ``# E: key``."""


def _errors(output: str, path: Path) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for line in output.splitlines():
        match = re.match(rf"{re.escape(str(path))}:(\d+): error: (.*)", line)
        if match:
            found.setdefault(int(match.group(1)), []).append(match.group(2))
    return found


@pytest.mark.xdist_group("mypy")  # mypy runs share .mypy_cache: one at a time
@pytest.mark.slow
def test_mypy_checks_proxy_calls(tmp_path: Path) -> None:
    if subprocess.run([sys.executable, "-m", "mypy", "--version"], capture_output=True).returncode != 0:
        pytest.skip("mypy is not installed (pip install -e '.[test]')")
    path = tmp_path / "proxies.py"
    path.write_text(MODULE)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    expected = {
        number: EXPECTED[line.split("# E: ", 1)[1]]
        for number, line in enumerate(MODULE.splitlines(), start=1)
        if "# E: " in line
    }
    assert len(expected) == len(EXPECTED)
    got = _errors(done.stdout, path)
    assert set(got) == set(expected), done.stdout  # no error on a correct line, one on each misuse
    for number, message in expected.items():
        assert any(message in error for error in got[number]), f"line {number}: {got[number]}"

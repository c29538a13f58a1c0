"""gear.run: Gear's entry points run on uvloop when it is installed, on asyncio when asked."""

from __future__ import annotations

import asyncio

import pytest

import gear


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__.split(".")[0]


def test_run_returns_the_coroutine_result_and_closes_its_loop() -> None:
    async def answer() -> int:
        return 42

    assert gear.run(answer()) == 42


def test_gear_loop_asyncio_keeps_the_standard_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEAR_LOOP", "asyncio")
    assert gear.run(_loop_module()) == "asyncio"


def test_uvloop_is_used_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("uvloop")
    monkeypatch.delenv("GEAR_LOOP", raising=False)
    assert gear.run(_loop_module()) == "uvloop"


def test_run_leaves_the_event_loop_policy_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEAR_LOOP", raising=False)
    before = type(asyncio.get_event_loop_policy())
    gear.run(_loop_module())
    assert type(asyncio.get_event_loop_policy()) is before

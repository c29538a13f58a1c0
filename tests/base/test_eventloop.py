"""gear.run: Gear's entry points run on uvloop when it is installed, on asyncio when asked."""

from __future__ import annotations

import asyncio
import os
import uuid
import warnings
from typing import Any

import pytest

import gear
from tests.backends import ENV_URL


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
    with warnings.catch_warnings():  # Python 3.14 deprecates the policy system (gear.run never uses it)
        warnings.simplefilter("ignore", DeprecationWarning)
        before = type(asyncio.get_event_loop_policy())
        gear.run(_loop_module())
        assert type(asyncio.get_event_loop_policy()) is before


@pytest.mark.parametrize("backend", ["reference", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)])
def test_calls_returns_and_casts_work_on_uvloop(backend: str) -> None:
    """On uvloop's loop (its own transports, reading into Gear's buffer as asyncio's do), deliveries,
    confirms and returns are read off the socket as on asyncio's."""
    pytest.importorskip("uvloop")
    url = os.environ.get(ENV_URL)
    if backend == "rabbitmq" and not url:
        pytest.skip(f"set {ENV_URL} to run this against RabbitMQ too")

    async def scenario() -> tuple[Any, ...]:
        from gear.broker import Broker

        broker = Broker(port=0) if backend == "reference" else None
        if broker is not None:
            await broker.start()
        tag = uuid.uuid4().hex[:6].upper()
        server = gear.Service(f"UV{tag}", "s1", url=broker.url if broker else url)
        client = gear.Service(f"UVC{tag}", "c1", url=broker.url if broker else url, serve=False)
        casts: list[Any] = []

        @server.handler("echo")
        async def echo(payload: dict[str, Any]) -> dict[str, Any]:
            return payload

        @server.handler("note")
        async def note(payload: Any) -> None:
            casts.append(payload)

        try:
            async with server, client:
                replies = await asyncio.gather(
                    *(client.rpc.call(f"UV{tag}.s1", "echo", {"n": n}) for n in range(50))
                )
                confirmed = await client.rpc.cast(f"UV{tag}.s1", "note", "x")
                with pytest.raises(gear.UnroutableError):
                    await client.rpc.call(f"NOBODY{tag}.h", "echo", {}, timeout=0.5)
                for _ in range(100):
                    if casts:
                        break
                    await asyncio.sleep(0.02)
                return await _loop_module(), [r["n"] for r in replies], confirmed, casts
        finally:
            if broker is not None:
                await broker.stop()

    loop, replies, confirmed, casts = gear.run(scenario())
    assert loop == "uvloop"
    assert replies == list(range(50))
    assert confirmed is True
    assert casts == ["x"]

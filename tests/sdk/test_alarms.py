"""Alarms: callbacks at loop times with one loop timer for all, cleared ones never ringing."""

from __future__ import annotations

import asyncio

from gear.alarms import Alarms


async def test_alarms_ring_in_order_and_cleared_ones_never_do() -> None:
    alarms, rang = Alarms(), list[str]()
    loop = asyncio.get_running_loop()
    now = loop.time()
    alarms.set(now + 0.03, lambda: rang.append("c"))
    token = alarms.set(now + 0.01, lambda: rang.append("never"))
    alarms.set(now + 0.02, lambda: rang.append("b"))
    alarms.set(now - 1.0, lambda: rang.append("a"))  # already due: rings at the next turn
    alarms.clear(token)
    await asyncio.sleep(0.06)
    assert rang == ["a", "b", "c"]
    assert len(alarms) == 0


async def test_a_failing_callback_does_not_stop_the_others() -> None:
    alarms, rang = Alarms(), list[str]()
    now = asyncio.get_running_loop().time()
    alarms.set(now, lambda: 1 / 0)
    alarms.set(now, lambda: rang.append("after"))
    await asyncio.sleep(0.01)
    assert rang == ["after"]


async def test_many_cleared_alarms_are_compacted_and_the_live_ones_still_ring() -> None:
    alarms, rang = Alarms(), list[int]()
    now = asyncio.get_running_loop().time()
    for _ in range(5000):
        alarms.clear(alarms.set(now + 60, lambda: rang.append(-1)))
    alarms.set(now + 0.01, lambda: rang.append(1))
    assert len(alarms) == 1
    await asyncio.sleep(0.03)
    assert rang == [1]
    alarms.cancel_all()

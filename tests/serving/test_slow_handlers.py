"""A handler slower than the caller's ``hedge_after`` says it is running, so its call is never copied
(a copy would only queue behind it, or run it twice on a shared ``TYPE``)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import gear
from tests.conftest import unique
from tests.fleet import Fleet, eventually


async def test_a_slow_async_handler_gets_no_copy_and_runs_once(fleet: Fleet) -> None:
    type_ = unique("SLOW")
    runs: Counter[int] = Counter()
    svc = fleet.service(type_, "s1")

    @svc.handler("work")
    async def work(n: int) -> int:
        runs[n] += 1
        await asyncio.sleep(1.2)  # three times the caller's hedge_after
        return n

    caller = fleet.client(hedge_after=0.4)
    await fleet.start(svc, caller)
    assert await asyncio.gather(
        *(caller.rpc.call(f"{type_}.s1", "work", n, timeout=10) for n in range(3))
    ) == [
        0,
        1,
        2,
    ]
    assert caller.stats["copies"] == 0
    assert runs == Counter({0: 1, 1: 1, 2: 1})


async def test_a_slow_plain_handler_gets_no_copy_either(fleet: Fleet) -> None:
    type_ = unique("SLOW")
    runs: Counter[int] = Counter()
    svc = fleet.service(type_, "s1")

    @svc.handler("work")
    def work(n: int) -> int:  # runs in a worker thread
        runs[n] += 1
        time.sleep(1.2)
        return n

    caller = fleet.client(hedge_after=0.4)
    await fleet.start(svc, caller)
    assert await caller.rpc.call(f"{type_}.s1", "work", 7, timeout=10) == 7
    assert caller.stats["copies"] == 0
    assert runs == Counter({7: 1})


async def test_a_deadline_still_ends_a_slow_async_handler(fleet: Fleet) -> None:
    """The served request's deadline cancels an async handler that outlives it."""
    type_ = unique("SLOW")
    ended: list[str] = []
    svc = fleet.service(type_, "s1")

    @svc.handler("work")
    async def work(n: int) -> int:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise
        return n

    caller = fleet.client(hedge_after=0.4)
    await fleet.start(svc, caller)
    try:
        await caller.rpc.call(f"{type_}.s1", "work", 1, timeout=1.5)
    except gear.CallTimeoutError:
        pass
    else:
        raise AssertionError("the call outlived its deadline")
    await eventually(lambda: ended == ["cancelled"], limit=5, what="the handler cancelled")
    assert caller.stats["copies"] == 0

"""One timer cancels every async handler whose deadline passed (gear.deadline)."""

from __future__ import annotations

import asyncio
import time

from gear.deadline import Deadlines


async def test_cancels_only_what_outlives_its_deadline() -> None:
    deadlines = Deadlines()
    done = asyncio.Event()

    async def waits() -> None:
        await done.wait()

    slow, quick, later = (asyncio.create_task(waits()) for _ in range(3))
    tokens = {
        "slow": deadlines.watch(slow, time.time() + 0.05),
        "quick": deadlines.watch(quick, time.time() + 0.05),
        "later": deadlines.watch(later, time.time() + 60),
    }
    assert deadlines.release(tokens["quick"]) is False  # finished in time: never cancelled
    await asyncio.wait([slow], timeout=5)
    assert slow.cancelled()
    assert deadlines.release(tokens["slow"]) is True  # the deadline fired for it
    assert not quick.done()
    assert not later.done()
    assert len(deadlines) == 1
    assert deadlines.release(tokens["later"]) is False
    done.set()
    await asyncio.gather(quick, later)


async def test_released_deadlines_do_not_pile_up() -> None:
    deadlines = Deadlines()
    task = asyncio.create_task(asyncio.sleep(1))
    for _ in range(5000):
        deadlines.release(deadlines.watch(task, time.time() + 30))
    assert len(deadlines._heap) <= 1024 + 2
    task.cancel()

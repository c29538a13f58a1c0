"""Timers (``gear.base.timers``): one heap for the broker's core and the SDK; in the SDK, one loop timer."""

from __future__ import annotations

import asyncio

import pytest

from gear.base.timers import LoopTimers, Timers


def test_due_timers_run_in_time_order_and_cancelled_ones_never_do() -> None:
    timers, ran = Timers(), list[str]()
    timers.call_at(3.0, lambda: ran.append("c"))
    never = timers.call_at(1.0, lambda: ran.append("never"))
    timers.call_at(2.0, lambda: ran.append("b"))
    timers.call_at(0.5, lambda: ran.append("a"))
    assert timers.cancel(never) is True
    assert timers.cancel(never) is False  # once only
    assert len(timers) == 3
    assert timers.next_deadline() == 0.5
    assert timers.run(2.0) == 2
    assert ran == ["a", "b"]
    assert timers.next_deadline() == 3.0
    assert timers.run(10.0) == 1
    assert ran == ["a", "b", "c"]
    assert timers.next_deadline() is None
    assert len(timers) == 0


def test_a_timer_that_ran_cannot_be_cancelled_any_more() -> None:
    timers = Timers()
    timer = timers.call_at(1.0, lambda: None)
    timers.run(1.0)
    assert timers.cancel(timer) is False
    assert timers.cancel(None) is False


def test_timers_armed_by_a_run_for_its_own_time_wait_for_the_next_run() -> None:
    timers, ran = Timers(), list[str]()
    timers.call_at(1.0, lambda: timers.call_at(1.0, lambda: ran.append("again")))
    assert timers.run(1.0) == 1
    assert ran == []
    assert timers.run(1.0) == 1
    assert ran == ["again"]


def test_a_failing_callback_is_counted_and_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    timers, ran = Timers(), list[str]()
    timers.call_at(1.0, lambda: 1 / 0)
    timers.call_at(1.0, lambda: ran.append("after"))
    with caplog.at_level("ERROR", logger="gear.base.timers"):
        assert timers.run(1.0) == 2
    assert ran == ["after"]
    assert timers.errors == 1
    assert "ZeroDivisionError" in caplog.text


def test_many_cancelled_timers_are_compacted_and_the_live_ones_still_run() -> None:
    timers, ran = Timers(), list[int]()
    for _ in range(5000):
        timers.cancel(timers.call_at(60.0, lambda: ran.append(-1)))
    timers.call_at(1.0, lambda: ran.append(1))
    assert len(timers) == 1
    assert len(timers._heap) < 600  # rebuilt whenever the cancelled ones were the majority
    timers.run(100.0)
    assert ran == [1]


def test_clear_forgets_every_timer() -> None:
    timers, ran = Timers(), list[int]()
    timer = timers.call_at(1.0, lambda: ran.append(1))
    timers.clear()
    assert timers.run(2.0) == 0
    assert timers.cancel(timer) is False
    assert len(timers) == 0


async def test_loop_timers_ring_at_loop_times_in_order() -> None:
    timers, rang = LoopTimers(), list[str]()
    now = asyncio.get_running_loop().time()
    done = asyncio.Event()

    def last() -> None:
        rang.append("c")
        done.set()

    timers.call_at(now + 0.03, last)
    never = timers.call_at(now + 0.01, lambda: rang.append("never"))
    timers.call_at(now + 0.02, lambda: rang.append("b"))
    timers.call_at(now - 1.0, lambda: rang.append("a"))  # already due: rings at the next turn
    timers.cancel(never)
    await asyncio.wait_for(done.wait(), 5)
    assert rang == ["a", "b", "c"]
    assert len(timers) == 0


async def test_loop_timers_cancel_a_task_and_tell_whether_they_did() -> None:
    """How the dispatcher cancels an async handler at its deadline: the timer was not pending any more."""
    timers = LoopTimers()
    release = asyncio.Event()
    slow, quick = (asyncio.create_task(release.wait()) for _ in range(2))
    now = asyncio.get_running_loop().time()
    slow_timer = timers.call_at(now + 0.01, slow.cancel)
    quick_timer = timers.call_at(now + 0.01, quick.cancel)
    assert timers.cancel(quick_timer) is True  # finished in time: never cancelled
    await asyncio.wait([slow], timeout=5)
    assert slow.cancelled()
    assert timers.cancel(slow_timer) is False  # it rang
    assert not quick.done()
    release.set()
    await quick


async def test_clearing_loop_timers_stops_their_loop_timer() -> None:
    timers, rang = LoopTimers(), list[int]()
    timers.call_at(asyncio.get_running_loop().time() + 0.01, lambda: rang.append(1))
    timers.clear()
    await asyncio.sleep(0.03)
    assert rang == []

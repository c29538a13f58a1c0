"""Busy polling (``Settings.busy_poll``): the event loop keeps polling for a window after each read or
write on the broker connection, then may sleep again; calls work the same with it on."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.fleet import Fleet
from tests.link.stream_fakes import fake_stream


def test_without_busy_poll_nothing_keeps_the_loop_awake() -> None:
    stream, loop = fake_stream(0.0)
    stream.data_received(b"x")
    stream.flush()
    assert not stream.polling
    assert loop.soon == []


@pytest.mark.parametrize("io", ["read", "write"])
def test_the_loop_polls_until_the_window_after_the_last_io_has_passed(io: str) -> None:
    stream, loop = fake_stream(0.001)
    if io == "read":
        stream.data_received(b"x")
    else:
        stream.flush()
    assert stream.polling
    for _ in range(5):  # within the window: every iteration schedules the next one
        loop.now += 0.0001
        loop.iteration()
        assert len(loop.soon) == 1
    stream.data_received(b"x")  # new I/O moves the window on, with no second poller
    loop.now += 0.0009
    loop.iteration()
    assert stream.polling
    assert len(loop.soon) == 1
    loop.now += 0.0002  # past the window: the loop may sleep again
    loop.iteration()
    assert not stream.polling
    assert loop.soon == []


def test_the_window_is_timed_finer_than_a_loop_clock_that_ticks_in_milliseconds() -> None:
    """uvloop's ``loop.time()`` moves in whole milliseconds; a 0.2 ms window still ends after 0.2 ms."""
    fine = [100.0]
    stream, loop = fake_stream(0.0002, clock=lambda: fine[0])
    stream.data_received(b"x")
    fine[0] += 0.0001  # the loop's clock stays where it was: less than a millisecond has passed
    loop.iteration()
    assert stream.polling
    fine[0] += 0.0002
    loop.iteration()
    assert not stream.polling
    assert loop.soon == []


def test_polling_stops_when_the_socket_closes() -> None:
    stream, loop = fake_stream(0.001)
    stream.data_received(b"x")
    stream.connection_lost(None)
    loop.iteration()
    assert not stream.polling
    assert loop.soon == []


async def test_calls_with_busy_polling_on_both_sides(fleet: Fleet) -> None:
    server = fleet.service("BPOLL", "s1", busy_poll=0.001)

    @server.handler("echo")
    async def echo(n: int) -> int:
        return n

    caller = fleet.client(busy_poll=1.0)  # a window longer than the quiet stretch below
    await fleet.start()
    assert [await caller.rpc.call("BPOLL.s1", "echo", n) for n in range(50)] == list(range(50))
    replies = await caller.rpc.gather("BPOLL.*", "echo", 7, expected=1, timeout=3)
    assert [(r.sender, r.result) for r in replies] == [("BPOLL.s1", 7)]
    # The setting reached the caller's connection: with nothing to do, its process still keeps a
    # core busy (a loop that sleeps in epoll_wait would spend next to no CPU here). On a loaded
    # machine the process gets little of a core, so it idles in stretches inside the polling window
    # (a call before each keeps the window open) until it has spent enough, up to ten stretches.
    idle_cpu = 0.0
    for n in range(10):
        assert await caller.rpc.call("BPOLL.s1", "echo", n) == n
        cpu = time.process_time()
        await asyncio.sleep(0.5)
        idle_cpu += time.process_time() - cpu
        if idle_cpu > 0.03:
            break
    assert idle_cpu > 0.03

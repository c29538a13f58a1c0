"""A consumer left behind on a connection that went silent (as on a cut-off cluster node, which the other
nodes keep registered until they declare it down) must not cost calls, and nothing may run twice.

One broker and a TCP proxy make the stale consumer: the server's link goes through the proxy, whose
:meth:`~gear.testing.TCPProxy.blackhole` makes it silent for good while the broker keeps it (a long
heartbeat); the server's probe finds it and reconnects, and the broker still hands the old consumer its
share until :meth:`~gear.testing.TCPProxy.drop_silent` (the cut heals). (On a real 4.3 cluster:
``tests/cluster/test_hard_faults.py``.)
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import gear
from gear.base.context import current_request
from gear.testing import TCPProxy
from tests.conftest import unique
from tests.fleet import Fleet, delete_queues, eventually

CUT_OFF = {"heartbeat": 60, "probe_quiet": 0.3, "probe_timeout": 0.5}
"""A server behind the proxy: the broker keeps its silent link for minutes, the probe leaves it in ~1 s."""


def _counting(svc: gear.Service, runs: Counter[str]) -> gear.Service:
    @svc.handler("echo")
    async def echo(n: int) -> int:
        ctx = current_request()
        assert ctx is not None
        runs[ctx.request_id] += 1
        return n

    return svc


async def _calls(caller: gear.Service, address: str, count: int, within: float) -> list[Any]:
    return await asyncio.gather(
        *(caller.rpc.call(address, "echo", n, timeout=within) for n in range(count)), return_exceptions=True
    )


async def test_a_call_handed_to_a_stale_instance_consumer_is_answered_through_a_copy(fleet: Fleet) -> None:
    type_ = unique("STL")
    runs: Counter[str] = Counter()
    async with TCPProxy.for_url(fleet.broker.url) as proxy:
        s1 = _counting(fleet.service(type_, "s1", url=proxy.url(fleet.broker.url), **CUT_OFF), runs)
        caller = fleet.client(hedge_after=0.3)
        await fleet.start(s1, caller)
        proxy.blackhole()  # the request below goes to the old consumer, and nowhere from there
        assert await _calls(caller, f"{type_}.s1", 3, within=8) == [0, 1, 2]
        assert s1.stats["reconnects"] >= 1
        assert caller.stats["copies"] >= 1
        proxy.drop_silent()  # the cut heals: the broker hands the originals back (redelivered)
        await eventually(lambda: s1.stats["duplicates"] >= 3, limit=20, what="the originals back")
    assert sorted(runs.values()) == [1, 1, 1]  # each ran once: the window answered the originals


async def test_without_copies_such_a_call_waits_out_its_deadline(fleet: Fleet) -> None:
    """The control: what ``hedge_after`` saves (``hedge_after=0``: no copies)."""
    type_ = unique("STL")
    runs: Counter[str] = Counter()
    async with TCPProxy.for_url(fleet.broker.url) as proxy:
        s1 = _counting(fleet.service(type_, "s1", url=proxy.url(fleet.broker.url), **CUT_OFF), runs)
        caller = fleet.client(hedge_after=0)
        await fleet.start(s1, caller)
        proxy.blackhole()
        with pytest.raises(gear.CallTimeoutError):
            await caller.rpc.call(f"{type_}.s1", "echo", 1, timeout=3)
        assert caller.stats["copies"] == 0


async def test_calls_parked_on_a_stale_shared_consumer_run_once_through_a_granted_copy(fleet: Fleet) -> None:
    """``TYPE``: the copy may reach the other instance, and the original comes back later to either:
    an instance runs a copy or a late original only once the caller granted it, and the caller grants
    one instance per call, none once the call is over."""
    type_ = unique("STL")
    runs: Counter[str] = Counter()
    async with TCPProxy.for_url(fleet.broker.url) as proxy:
        s1 = _counting(fleet.service(type_, "s1", url=proxy.url(fleet.broker.url), **CUT_OFF), runs)
        s2 = _counting(fleet.service(type_, "s2"), runs)
        caller = fleet.client(hedge_after=0.3, hedge_shared=True)
        await fleet.start(s1, s2, caller)
        proxy.blackhole()
        assert await _calls(caller, type_, 8, within=8) == list(range(8))
        assert caller.stats["copies"] >= 1  # some went to the stale consumer
        proxy.drop_silent()
        # each late original is refused by its caller, or met by the window of the instance that ran
        # its copy (the new consumer goes first: it took the copies)
        dropped = lambda: sum(s.stats["superseded"] + s.stats["duplicates"] for s in (s1, s2))  # noqa: E731
        await eventually(lambda: dropped() >= 1, limit=20, what="a late original dropped")
        await asyncio.sleep(0.5)
    assert len(runs) == 8
    assert set(runs.values()) == {1}


@pytest.mark.parametrize("address", ["instance", "shared"])
async def test_a_slow_handler_gets_no_copy(fleet: Fleet, address: str) -> None:
    """It says ``running`` a quarter of ``hedge_after`` after it started: its caller sends no copy."""
    type_ = unique("SLW")
    runs: list[int] = []
    svc = fleet.service(type_, "s1")

    @svc.handler("slow")
    async def slow(n: int) -> int:
        runs.append(n)
        await asyncio.sleep(1.5)
        return n

    caller = fleet.client(hedge_after=0.3)
    await fleet.start(svc, caller)
    target = f"{type_}.s1" if address == "instance" else type_
    assert await caller.rpc.call(target, "slow", 5, timeout=10) == 5
    assert runs == [5]
    assert caller.stats["copies"] == 0


async def test_after_a_silent_loss_the_new_shared_consumer_goes_first_for_a_while(fleet: Fleet) -> None:
    """The stale consumer would get every third request to ``TYPE`` (each lost without copies): the new
    one has precedence (``x-priority`` 1) for ``type_precedence_after_loss``, and then shares again."""
    type_ = unique("STL")
    hosts: list[str] = []
    async with TCPProxy.for_url(fleet.broker.url) as proxy:
        servers = []
        for host, url in (("s1", proxy.url(fleet.broker.url)), ("s2", fleet.broker.url)):
            svc = fleet.service(type_, host, url=url, type_precedence_after_loss=3.0, **CUT_OFF)

            @svc.handler("where")
            async def where(_: Any = None, host: str = host) -> str:
                hosts.append(host)
                return host

            servers.append(svc)
        caller = fleet.client(hedge_after=0)
        await fleet.start(*servers, caller)
        proxy.blackhole()
        await eventually(lambda: servers[0].connected and servers[0].stats["reconnects"] >= 1, limit=20,
                         what="s1 reconnected")  # fmt: skip
        for _ in range(12):  # none of them goes to the stale consumer (each would time out)
            assert await caller.rpc.call(type_, "where", timeout=3) == "s1"
        proxy.drop_silent()  # the cut heals: the stale consumer goes
        await asyncio.sleep(3.5)  # precedence over: the instances share the queue again
        seen = {await caller.rpc.call(type_, "where", timeout=3) for _ in range(12)}
    assert "s2" in seen


async def test_a_consumer_the_broker_cancelled_is_no_silent_loss_so_the_queue_is_shared_at_once(
    fleet: Fleet,
) -> None:
    """s1's instance queue is deleted behind its back: the broker cancels its consumer, s1 rebuilds its
    link, and its new consumer of ``TYPE`` shares the queue with s2 at once (no precedence: the broker
    saw the old link close), instead of taking every request for ``type_precedence_after_loss``."""
    type_ = unique("CNL")
    hosts: list[str] = []
    servers = []
    for host in ("s1", "s2"):
        svc = fleet.service(type_, host, type_precedence_after_loss=600.0)

        @svc.handler("where")
        async def where(_: Any = None, host: str = host) -> str:
            hosts.append(host)
            return host

        servers.append(svc)
    caller = fleet.client()
    await fleet.start(*servers, caller)
    await delete_queues(fleet.broker.url, [f"{type_}.s1"])
    await eventually(lambda: servers[0].connected and servers[0].stats["reconnects"] >= 1, limit=20,
                     what="s1 reconnected")  # fmt: skip
    seen = {await caller.rpc.call(type_, "where", timeout=3) for _ in range(12)}
    assert seen == {"s1", "s2"}

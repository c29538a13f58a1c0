"""Mandatory publishes, returns and republish, and the seed's lost-queue incident replayed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import gear
from tests.conftest import unique
from tests.fleet import Fleet, delete_queues, eventually


async def test_an_unroutable_call_fails_once_returned_twice_naming_the_broker(fleet: Fleet) -> None:
    web = fleet.client()
    await fleet.start()
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(
        gear.UnroutableError, match=r"on amqp://guest:\*\*\*@.*\(2 attempt\(s\) returned\)"
    ) as info:
        await web.rpc.call(f"{unique('REPO')}.gone", "status", timeout=30.0)
    assert loop.time() - started < 30.0  # the returns proved it: the deadline was not waited for
    assert info.value.attempts == 2  # republished once before giving up
    assert web.stats["returns"] == 2


async def test_without_a_cap_an_unroutable_call_is_republished_until_its_deadline(fleet: Fleet) -> None:
    web = fleet.client(unroutable_after=None)
    await fleet.start()
    with pytest.raises(gear.UnroutableError) as info:
        await web.rpc.call(f"{unique('REPO')}.gone", "status", timeout=1.0)
    assert info.value.attempts > 2


async def test_returned_call_is_republished_until_the_instance_appears(fleet: Fleet) -> None:
    repo = unique("REPO")
    late = fleet.service(repo, "h5")

    @late.handler("status")
    async def status(_: Any = None) -> str:
        return "here"

    web = fleet.client(unroutable_after=None)  # wait for the instance to appear
    await web.start()
    call = asyncio.create_task(web.rpc.call(f"{repo}.h5", "status", timeout=8))
    await eventually(lambda: web.stats["returns"] >= 1)
    await late.start()
    assert await call == "here"
    assert web.stats["republishes"] >= 1


async def test_unroutable_cast_goes_to_on_undeliverable(fleet: Fleet) -> None:
    web = fleet.client(cast_retry_budget=0.5)
    lost: list[tuple[str, str, Any]] = []

    @web.on_undeliverable
    def undeliverable(address: str, method: str, payload: Any) -> None:
        lost.append((address, method, payload))

    await fleet.start()
    target = f"{unique('CTRL')}.*"
    assert await web.rpc.cast(target, "reload", {"version": 7}) is False
    assert lost == [(target, "reload", {"version": 7})]

    web.on_undeliverable = None
    with pytest.raises(gear.UnroutableError):
        await web.rpc.cast(target, "reload", {"version": 8}, retry_budget=1.0)


async def test_deleted_queue_incident(fleet: Fleet) -> None:
    """Queue metadata vanishes behind the instances' backs (seed 000's incident): nothing confirmed
    may be lost, and calls succeed once the instance re-declares its topology."""
    repo = unique("REPO")
    got: list[int] = []
    servers = [fleet.service(repo, h) for h in ("h1", "h2")]
    for svc in servers:

        @svc.handler("store")
        async def store(n: int) -> None:
            got.append(n)

        @svc.handler("whoami")
        async def whoami(_: Any = None, _s: gear.Service = svc) -> str:
            return _s.identity

    web = fleet.client()
    await fleet.start()
    assert await web.rpc.call(f"{repo}.h1", "whoami") == f"{repo}.h1"

    await delete_queues(fleet.broker.url, [f"{repo}.h1", repo])
    confirmed: list[int] = []
    for n in range(40):
        target = f"{repo}.h1" if n % 2 else repo
        if await web.rpc.cast(target, "store", n):
            confirmed.append(n)
    assert await web.rpc.call(f"{repo}.h1", "whoami", timeout=5) == f"{repo}.h1"
    # Each instance re-declares and consumes again on its own cancel notification: the shared queue
    # round-robins over both once the later of the two is back, not necessarily at once.
    served: set[str] = set()
    loop = asyncio.get_running_loop()
    end = loop.time() + 10
    while served != {f"{repo}.h1", f"{repo}.h2"} and loop.time() < end:
        served.add(await web.rpc.call(repo, "whoami", timeout=5))
    assert served == {f"{repo}.h1", f"{repo}.h2"}
    assert confirmed == list(range(40))
    await eventually(lambda: sorted(got) == confirmed, what="every confirmed cast delivered")
    await eventually(lambda: all(s.connected for s in servers))

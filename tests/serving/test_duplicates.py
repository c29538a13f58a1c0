"""The duplicate window: a request id seen again does not run its handler again on that instance."""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiormq
import pytest

from gear.base.envelope import DEADLINE, METHOD
from gear.serving.duplicates import DuplicateWindow
from tests.conftest import unique
from tests.fleet import Fleet, eventually


def _has_replies(peer: RawPeer, count: int) -> bool:
    return len(peer.replies) == count


class RawPeer:
    """A hand-rolled caller: publishes Gear requests with a chosen request id, reads the replies."""

    def __init__(self, channel: Any, exchange: str, reply_key: str) -> None:
        self.channel = channel
        self.exchange = exchange
        self.reply_key = reply_key
        self.replies: list[tuple[str, Any]] = []

    async def request(
        self,
        address: str,
        method: str,
        payload: Any,
        request_id: str,
        *,
        kind: str = "gear.call",
        timeout: float = 10.0,  # noqa: ASYNC109 - the request's deadline
    ) -> None:
        headers: dict[str, Any] = {METHOD: method}
        if kind != "gear.cast":
            headers[DEADLINE] = int((time.time() + timeout) * 1000)
        await self.channel.basic_publish(
            json.dumps(payload).encode(),
            exchange=self.exchange,
            routing_key=address,
            properties=aiormq.spec.Basic.Properties(
                message_type=kind,
                correlation_id=request_id,
                message_id=f"{request_id}.1",
                app_id="RAW.r1",
                reply_to=None if kind == "gear.cast" else self.reply_key,
                headers=headers,
            ),
        )

    def _on_reply(self, message: Any) -> None:
        self.replies.append((message.header.properties.correlation_id, json.loads(message.body)))


@asynccontextmanager
async def raw_peer(fleet: Fleet) -> AsyncIterator[RawPeer]:
    conn = await aiormq.connect(fleet.broker.url)
    try:
        ch = await conn.channel()
        key = unique("RAW.")
        queue = (await ch.queue_declare(exclusive=True)).queue
        assert queue is not None
        await ch.queue_bind(queue, fleet.exchange, routing_key=key)
        peer = RawPeer(ch, fleet.exchange, key)

        async def on_message(message: Any) -> None:
            peer._on_reply(message)

        await ch.basic_consume(queue, on_message, no_ack=True)
        yield peer
    finally:
        await conn.close()


async def test_a_repeated_request_id_gets_the_first_runs_reply(fleet: Fleet) -> None:
    repo = unique("REPO")
    runs: list[tuple[str, str, int]] = []
    servers = [fleet.service(repo, h) for h in ("h1", "h2")]
    for svc in servers:

        @svc.handler("charge")
        async def charge(amount: int, _h: str = svc.host) -> dict[str, Any]:
            runs.append((_h, "charge", amount))
            await asyncio.sleep(0.3)
            return {"charged": amount, "run": len(runs)}

        @svc.handler("count", dedupe=False)
        async def count(n: int, _h: str = svc.host) -> int:
            runs.append((_h, "count", n))
            return n

        @svc.handler("notify")
        async def notify(n: int, _h: str = svc.host) -> None:
            runs.append((_h, "notify", n))

        @svc.handler("reload", idempotency_window=60)
        async def reload(n: int, _h: str = svc.host) -> None:
            runs.append((_h, "reload", n))

    await fleet.start()
    h1, h2 = f"{repo}.h1", f"{repo}.h2"
    async with raw_peer(fleet) as peer:
        # the same request id twice while the first run is in progress, then once more after it
        await peer.request(h1, "charge", 5, "aaaa000000000001")
        await peer.request(h1, "charge", 5, "aaaa000000000001")
        await eventually(lambda: len(peer.replies) == 2, what="two replies")
        await peer.request(h1, "charge", 5, "aaaa000000000001")
        await eventually(lambda: len(peer.replies) == 3, what="the third reply")
        assert peer.replies == [("aaaa000000000001", {"charged": 5, "run": 1})] * 3
        assert runs == [("h1", "charge", 5)]
        assert servers[0].stats["duplicates"] == 2

        # the window is per instance: the same id sent to another instance runs there (once)
        await peer.request(h2, "charge", 5, "aaaa000000000001")
        await eventually(lambda: len(peer.replies) == 4)
        assert runs[-1] == ("h2", "charge", 5)

        # opt-out: every delivery runs; casts are remembered only with an idempotency window
        for _ in range(2):
            await peer.request(h1, "count", 7, "bbbb000000000001")
            await peer.request(h1, "notify", 8, "cccc000000000001", kind="gear.cast")
            await peer.request(h1, "reload", 9, "dddd000000000001", kind="gear.cast")
        await eventually(lambda: len(peer.replies) == 6, what="both count replies")
        await eventually(lambda: sum(1 for r in runs if r[1] == "notify") == 2)
        await eventually(lambda: servers[0].stats["duplicates"] == 3, what="the repeated reload")
    assert [r[1] for r in runs].count("count") == 2
    assert [r[1] for r in runs].count("reload") == 1


async def test_a_cut_redelivers_and_the_default_window_runs_the_handler_once(fleet: Fleet) -> None:
    from gear.testing import TCPProxy

    repo = unique("REPO")
    runs: list[int] = []
    async with TCPProxy.for_url(fleet.broker.url) as proxy:
        server = fleet.service(repo, "h1", url=proxy.url(fleet.broker.url), reconnect_initial=0.05)
        fleet.service(repo, "h2")

        @server.handler("charge")  # no idempotency_window: calls are deduplicated by default
        async def charge(amount: int) -> int:
            runs.append(amount)
            await asyncio.sleep(0.5)
            return len(runs)

        web = fleet.client()
        await fleet.start()
        call = asyncio.create_task(web.rpc.call(f"{repo}.h1", "charge", 5, timeout=10))
        await eventually(lambda: server.stats["handlers_in_flight"] == 1)
        await proxy.disconnect_all()  # the broker requeues the unacked request: a redelivery
        assert await call == 1
        await eventually(lambda: server.stats["duplicates"] >= 1, what="the redelivery was recognised")
        assert runs == [5]


async def test_the_window_is_bounded(fleet: Fleet) -> None:
    repo = unique("REPO")
    svc = fleet.service(repo, "h1", duplicate_window_entries=2)
    runs: list[int] = []

    @svc.handler("work")
    async def work(n: int) -> int:
        runs.append(n)
        return n

    await fleet.start()
    async with raw_peer(fleet) as peer:
        for n, rid in enumerate(("e000000000000001", "e000000000000002", "e000000000000003")):
            await peer.request(f"{repo}.h1", "work", n, rid)
            await eventually(functools.partial(_has_replies, peer, n + 1))
        assert svc.stats["duplicate_window_evicted"] == 1  # the third pushed the first out early
        await peer.request(f"{repo}.h1", "work", 0, "e000000000000001")  # forgotten: runs again
        await peer.request(f"{repo}.h1", "work", 2, "e000000000000003")  # remembered: does not
        await eventually(lambda: len(peer.replies) == 5)
    assert runs == [0, 1, 2, 0]


def test_window_expiry_and_caps() -> None:
    window = DuplicateWindow(max_entries=3, max_bytes=10)
    assert window.claim("a", expires=100.0, now=0.0)
    assert not window.claim("a", expires=100.0, now=1.0)  # a repeat
    window.settle("a", 100.0, (True, b"12345"))
    assert window.cached_bytes == 5
    assert window.claim("b", expires=50.0, now=2.0)
    assert window.claim("c", expires=300.0, now=60.0)  # "b" expired on the way
    assert len(window) == 2
    window.settle("c", 300.0, (True, b"123456789"))  # 14 bytes > 10: "a" (expiring first) leaves
    assert (len(window), window.cached_bytes, window.evicted) == (1, 9, 1)
    assert window.claim("a", expires=100.0, now=61.0)  # forgotten: a repeat would run again
    assert window.claim("d", expires=300.0, now=61.0)
    assert window.claim("e", expires=300.0, now=61.0)  # four entries > 3: "a" leaves again
    assert (len(window), window.evicted) == (3, 2)
    assert window.claim("g", expires=400.0, now=101.0)
    assert window.evicted == 3  # "c" (the first to expire) had to leave early for "g"
    window.settle("g", 400.0, None)  # no reply was sent: forgotten, so a repeat may run
    assert window.claim("g", expires=400.0, now=102.0)


def test_window_entries_are_not_tracked_by_the_garbage_collector() -> None:
    window = DuplicateWindow()
    for n in range(1000):
        window.claim(f"{n:016x}", expires=1e12, now=0.0)
        window.settle(f"{n:016x}", 1e12, (True, b"x" * 100))
    gc.collect()
    assert not any(gc.is_tracked(entry) for entry in window._entries.values())
    assert not any(gc.is_tracked(item) for item in window._expiry)


@pytest.mark.parametrize("outcome", [(True, b'"x"'), None])
async def test_a_repeat_waits_for_the_run_in_progress(outcome: tuple[bool, bytes] | None) -> None:
    window = DuplicateWindow()
    assert window.claim("r", expires=time.time() + 10, now=time.time())
    expires = next(iter(window._entries.values()))[0]
    waiting = [asyncio.ensure_future(window.outcome("r")) for _ in range(2)]
    gave_up = asyncio.ensure_future(window.outcome("r"))
    await asyncio.sleep(0)
    gave_up.cancel()
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiting)
    window.settle("r", expires, outcome)
    assert await asyncio.gather(*waiting) == [outcome, outcome]
    assert await window.outcome("r") == outcome
    assert not window._waiters

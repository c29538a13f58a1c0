"""A stop that drains: no new requests, replies keep flowing to the handlers in flight, then close."""

from __future__ import annotations

import asyncio

import gear
from tests.conftest import unique
from tests.fleet import Fleet, eventually


async def test_stop_while_handlers_wait_on_nested_calls(fleet: Fleet) -> None:
    ctrl, repo = unique("CTRL"), unique("REPO")
    release = asyncio.Event()
    started: list[str] = []
    r = fleet.service(repo, "r1")

    @r.handler("fetch")
    async def fetch(key: str) -> str:
        started.append(key)
        await release.wait()
        return key.upper()

    def make_ctrl(host: str) -> gear.Service:
        svc = fleet.service(ctrl, host, drain_timeout=10.0)

        @svc.handler("page")
        async def page(key: str) -> str:
            return f"{host}:" + await svc.rpc.call(f"{repo}.r1", "fetch", key)

        @svc.handler("page_plain")
        def page_plain(key: str) -> str:
            return f"{host}:" + svc.rpc.sync.call(f"{repo}.r1", "fetch", key)

        @svc.handler("where")
        async def where(_: object = None) -> str:
            return host

        return svc

    c1, _c2 = make_ctrl("c1"), make_ctrl("c2")
    web = fleet.client()
    await fleet.start()
    first = asyncio.create_task(web.rpc.call(f"{ctrl}.c1", "page", "a", timeout=15))
    second = asyncio.create_task(web.rpc.call(f"{ctrl}.c1", "page_plain", "b", timeout=15))
    await eventually(lambda: sorted(started) == ["a", "b"], what="both nested calls under way")

    stopping = asyncio.create_task(c1.stop())
    await eventually(lambda: c1._draining, what="c1 draining")
    # while c1 drains, the shared CTRL queue is served by c2 only ...
    assert {await web.rpc.call(ctrl, "where", timeout=5) for _ in range(4)} == {"c2"}
    # ... and a request for c1 itself is left alone (not run, not acknowledged)
    late = asyncio.create_task(web.rpc.call(f"{ctrl}.c1", "where", timeout=15))
    await eventually(lambda: c1.stats["held_at_stop"] == 1, what="c1 left the new request alone")
    release.set()
    # the nested calls' replies still reach c1, so the original callers get their answers
    assert await first == "c1:A"
    assert await second == "c1:B"
    await asyncio.wait_for(stopping, 10)
    assert not c1.connected
    assert c1.stats["cancelled"] == 0
    assert not late.done()
    # the request c1 did not take went back to its queue: the restarted instance answers it
    await make_ctrl("c1").start()
    assert await asyncio.wait_for(late, 15) == "c1"


async def test_stop_gives_up_after_drain_timeout_and_the_request_is_requeued(fleet: Fleet) -> None:
    repo = unique("REPO")
    runs: list[tuple[str, bool]] = []

    def make(host: str, *, hangs: bool) -> gear.Service:
        svc = fleet.service(repo, host, drain_timeout=0.3)

        @svc.handler("work")
        async def work(tag: str) -> str:
            req = gear.current_request()
            assert req is not None
            runs.append((host, req.redelivered))
            if hangs:
                await asyncio.Event().wait()  # only the stop ends it
            return f"{tag} by {host}"

        return svc

    h1 = make("h1", hangs=True)
    make("h2", hangs=False)
    web = fleet.client()
    await fleet.start()
    call = asyncio.create_task(web.rpc.call(f"{repo}.h1", "work", "x", timeout=15))
    await eventually(lambda: runs == [("h1", False)])
    await h1.stop()  # drain_timeout passes: the handler is cancelled and its request not acked
    assert not call.done()
    assert h1.stats["handlers_in_flight"] == 0
    await make("h1", hangs=False).start()  # restarted, it gets the request back, redelivered
    assert await asyncio.wait_for(call, 15) == "x by h1"
    assert runs == [("h1", False), ("h1", True)]


async def test_a_stopped_service_serves_again_after_start(fleet: Fleet) -> None:
    repo = unique("REPO")
    svc = fleet.service(repo, "h1")

    @svc.handler("echo")
    def echo(n: int) -> int:
        assert not gear.cancelled()
        return n

    web = fleet.client()
    await fleet.start()
    assert await web.rpc.call(f"{repo}.h1", "echo", 1) == 1
    await svc.stop()
    await svc.start()
    assert await web.rpc.call(f"{repo}.h1", "echo", 2) == 2
    assert await web.rpc.call(repo, "echo", 3) == 3

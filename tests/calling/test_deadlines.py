"""Deadlines travel with requests: nested calls inherit the budget, expired requests are dropped."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiormq
import pytest

import gear
from gear.base.envelope import DEADLINE, METHOD
from tests.conftest import unique
from tests.fleet import Fleet, eventually


async def test_nested_calls_inherit_the_remaining_budget(fleet: Fleet) -> None:
    ctrl, repo = unique("CTRL"), unique("REPO")
    seen: dict[str, Any] = {}
    c = fleet.service(ctrl, "h1")
    r = fleet.service(repo, "h1")

    @c.handler("page")
    async def page(name: str) -> dict[str, Any]:
        seen["ctrl_deadline"] = gear.current_deadline()
        seen["ctrl_request"] = gear.current_request()
        # a generous timeout of its own: the caller's deadline still wins
        data = await c.rpc.call(f"{repo}.h1", "lookup", name, timeout=60)
        return {"page": name, "data": data}

    @c.handler("impatient")
    async def impatient(_: Any = None) -> str:
        try:
            await c.rpc.call(f"{repo}.h1", "stall", timeout=60)
        except gear.CallTimeoutError as exc:
            return f"timeout after {exc.timeout:.2f}"
        return "no timeout"

    @r.handler("lookup")
    def lookup(name: str) -> str:  # plain handler: the context reaches the worker thread
        seen["repo_deadline"] = gear.current_deadline()
        seen["repo_request"] = gear.current_request()
        return name.upper()

    @r.handler("stall")
    async def stall(_: Any = None) -> None:
        await asyncio.sleep(30)

    web = fleet.client()
    await fleet.start()
    before = time.time()
    assert await web.rpc.call(f"{ctrl}.h1", "page", "home", timeout=4) == {"page": "home", "data": "HOME"}
    assert seen["ctrl_deadline"] == pytest.approx(before + 4, abs=0.5)
    # inherited, minus the margin the handler keeps for its own reply: a tenth of the 4 s left
    assert seen["ctrl_deadline"] - 0.45 < seen["repo_deadline"] < seen["ctrl_deadline"] - 0.3
    ctrl_req: gear.RequestContext = seen["ctrl_request"]
    repo_req: gear.RequestContext = seen["repo_request"]
    assert ctrl_req.sender == web.identity
    assert repo_req.sender == f"{ctrl}.h1"
    assert repo_req.trace_id == ctrl_req.trace_id  # one trace for the call tree

    # the nested call's own 60 s timeout is capped by the 4 s budget of the outer request, less the
    # tenth the handler keeps to answer (room for a full garbage collection on the way back)
    answer = await web.rpc.call(f"{ctrl}.h1", "impatient", timeout=4)
    assert answer.startswith("timeout after")
    assert 2.5 < float(answer.split()[-1]) < 3.7


async def test_expired_requests_are_dropped_by_the_server(fleet: Fleet) -> None:
    repo = unique("REPO")
    svc = fleet.service(repo, "h1")
    ran: list[str] = []

    @svc.handler("work")
    async def work(tag: str) -> None:
        ran.append(tag)

    await fleet.start()
    # a request whose absolute deadline has passed (and no broker TTL): the server must drop it
    conn = await aiormq.connect(fleet.broker.url)
    try:
        ch = await conn.channel()
        for tag, deadline in (("stale", time.time() - 5), ("fresh", time.time() + 30)):
            await ch.basic_publish(
                b'"%s"' % tag.encode(),
                exchange=fleet.exchange,
                routing_key=f"{repo}.h1",
                properties=aiormq.spec.Basic.Properties(
                    message_type="gear.call",
                    correlation_id=tag + "0" * 11,
                    app_id="TEST.t1",
                    headers={METHOD: "work", DEADLINE: int(deadline * 1000)},
                ),
            )
    finally:
        await conn.close()
    await eventually(lambda: ran == ["fresh"])
    await eventually(lambda: svc.stats["expired"] == 1)


async def test_default_timeout_is_finite_and_configurable(fleet: Fleet) -> None:
    assert gear.Settings().timeout > 0
    repo = unique("REPO")
    svc = fleet.service(repo, "h1")

    @svc.handler("stall")
    async def stall(_: Any = None) -> None:
        await asyncio.sleep(2)

    web = fleet.service(unique("WEB"), "w1", timeout=0.3, serve=False)
    await fleet.start()
    with pytest.raises(gear.CallTimeoutError) as info:
        await web.rpc.call(f"{repo}.h1", "stall")
    assert info.value.timeout == pytest.approx(0.3)

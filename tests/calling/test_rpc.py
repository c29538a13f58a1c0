"""Calls (awaitable and callback), gather, typed errors, plain handlers, stateless replies."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from pydantic import BaseModel

import gear
from tests.conftest import unique
from tests.fleet import Fleet, eventually


class StatusQuery(BaseModel):
    verbose: bool = False


class StatusReport(BaseModel):
    host: str
    verbose: bool
    items: list[int]


class RefusedError(Exception):
    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.details = {"reason": reason}


def _repo(fleet: Fleet, type_: str, host: str) -> gear.Service:
    svc = fleet.service(type_, host)

    @svc.handler("status")
    async def status(query: StatusQuery) -> StatusReport:
        return StatusReport(host=host, verbose=query.verbose, items=[1, 2, 3])

    @svc.handler("blocking")
    def blocking(n: int) -> dict[str, Any]:
        return {"n": n * 2, "thread": threading.current_thread().name}

    @svc.handler("refuse")
    async def refuse(why: str) -> None:
        raise RefusedError("no way", why)

    @svc.handler("slow")
    async def slow(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "done"

    @svc.handler("slow_to_the_end", cancel_at_deadline=False)
    async def slow_to_the_end(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "done"

    return svc


async def test_call_awaitable_callback_and_models(fleet: Fleet) -> None:
    repo = unique("REPO")
    _repo(fleet, repo, "h1")
    _repo(fleet, repo, "h2")
    web = fleet.client()
    await fleet.start()

    result = await web.rpc.call_as(StatusReport, f"{repo}.h2", "status", StatusQuery(verbose=True))
    assert result == StatusReport(host="h2", verbose=True, items=[1, 2, 3])
    raw = await web.rpc.call(f"{repo}.h1", "status", {"verbose": False})
    assert raw == {"host": "h1", "verbose": False, "items": [1, 2, 3]}
    assert (await web.rpc.call(repo, "status"))["host"] in {"h1", "h2"}

    got: asyncio.Queue[Any] = asyncio.Queue()
    returned = await web.rpc.call_with_callback(f"{repo}.h1", "status", {}, callback=got.put_nowait)
    assert isinstance(returned, str)  # the request id
    assert (await asyncio.wait_for(got.get(), 5))["host"] == "h1"

    async def async_cb(value: Any) -> None:
        await got.put(value)

    await web.rpc.call_with_callback(f"{repo}.h2", "refuse", "because", callback=async_cb)
    err = await asyncio.wait_for(got.get(), 5)
    assert isinstance(err, gear.RemoteError)
    assert err.type == "RefusedError"

    await web.rpc.call_with_callback(f"{repo}.h2", "slow", 2.0, callback=got.put_nowait, timeout=0.3)
    assert isinstance(await asyncio.wait_for(got.get(), 5), gear.CallTimeoutError)


async def test_plain_handlers_run_in_a_thread_pool(fleet: Fleet) -> None:
    repo = unique("REPO")
    _repo(fleet, repo, "h1")
    web = fleet.client()
    await fleet.start()
    results = await asyncio.gather(*(web.rpc.call(f"{repo}.h1", "blocking", i) for i in range(8)))
    assert [r["n"] for r in results] == [i * 2 for i in range(8)]
    assert all(r["thread"].startswith("gear-") for r in results)


async def test_typed_remote_errors(fleet: Fleet) -> None:
    repo = unique("REPO")
    _repo(fleet, repo, "h1")
    web = fleet.client()
    await fleet.start()
    target = f"{repo}.h1"

    with pytest.raises(gear.RemoteError) as info:
        await web.rpc.call(target, "refuse", "policy")
    assert info.value.type == "RefusedError"
    assert info.value.message == "no way"
    assert info.value.details == {"reason": "policy"}
    assert type(info.value) is gear.RemoteError

    with pytest.raises(gear.MethodNotFoundError):
        await web.rpc.call(target, "no-such-method")
    with pytest.raises(gear.BadPayloadError) as bad:
        await web.rpc.call(target, "status", {"verbose": "not-a-bool"})
    assert bad.value.details["errors"][0]["loc"] == ["verbose"]
    with pytest.raises(gear.BadPayloadError):
        await web.rpc.call(target, "blocking", "seven")

    with pytest.raises(gear.ConfigurationError):
        await web.rpc.call(f"{repo}.*", "status")
    with pytest.raises(gear.ConfigurationError):
        await web.rpc.call("bad.address.form", "status")
    with pytest.raises(gear.ConfigurationError):
        await web.rpc.call(target, "status", object())
    for exc in (gear.RemoteError, gear.MethodNotFoundError, gear.CallTimeoutError, gear.UnroutableError):
        assert issubclass(exc, gear.GearError)


async def test_late_reply_is_dropped_and_counted(fleet: Fleet) -> None:
    repo = unique("REPO")
    _repo(fleet, repo, "h1")
    web = fleet.client()
    await fleet.start()
    with pytest.raises(gear.CallTimeoutError):  # a handler that opted out of cancellation replies late
        await web.rpc.call(f"{repo}.h1", "slow_to_the_end", 0.6, timeout=0.3)
    await eventually(lambda: web.stats["late_replies"] == 1)
    assert web.stats["calls_in_flight"] == 0
    assert await web.rpc.call(f"{repo}.h1", "slow", 0.0) == "done"


async def test_gather_collects_until_expected_or_timeout(fleet: Fleet) -> None:
    ctrl = unique("CTRL")
    for host in ("h1", "h2", "h3"):
        svc = fleet.service(ctrl, host)

        @svc.handler("status")
        async def status(_: Any = None, _h: str = host) -> str:
            if _h == "h3":
                raise RuntimeError("disk full")
            return _h

    web = fleet.client()
    await fleet.start()
    replies = await web.rpc.gather(f"{ctrl}.*", "status", timeout=3, expected=3)
    assert sorted(r.sender for r in replies) == [f"{ctrl}.h1", f"{ctrl}.h2", f"{ctrl}.h3"]
    by_sender = {r.sender: r for r in replies}
    assert by_sender[f"{ctrl}.h1"].result == "h1"
    assert by_sender[f"{ctrl}.h1"].ok
    assert by_sender[f"{ctrl}.h3"].error is not None
    error = by_sender[f"{ctrl}.h3"].error
    assert error is not None
    assert error.type == "RuntimeError"

    partial = await web.rpc.gather(f"{ctrl}.*", "status", timeout=1.5, expected=10)
    assert len(partial) == 3
    assert await web.rpc.gather(f"{unique('NOBODY')}.*", "status", timeout=0.5) == []


async def test_stateless_caller_gets_replies_through_reply_handler(fleet: Fleet) -> None:
    repo, web_type = unique("REPO"), unique("WEB")
    _repo(fleet, repo, "h1")
    got: asyncio.Queue[gear.Reply] = asyncio.Queue()
    webs = [fleet.service(web_type, h) for h in ("w1", "w2")]
    for w in webs:
        w.reply_handler("status")(got.put_nowait)
    await fleet.start()
    rid = await webs[0].rpc.call_reply_to(web_type, f"{repo}.h1", "status", {"verbose": True})
    reply = await asyncio.wait_for(got.get(), 5)
    assert reply.request_id == rid
    assert reply.sender == f"{repo}.h1"
    assert reply.result["verbose"] is True

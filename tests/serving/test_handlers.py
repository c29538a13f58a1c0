"""Handlers live by the caller's deadline: cancellation, nested calls from plain handlers, results
that do not fit ``result_type``."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from pydantic import BaseModel

import gear
from gear.tracing.api import EventName
from gear.tracing.tracer import InMemoryTracer
from tests.conftest import unique
from tests.fleet import Fleet, eventually


class Item(BaseModel):
    key: str
    value: str


async def test_handlers_past_their_deadline_are_cancelled_and_send_no_reply(fleet: Fleet) -> None:
    repo = unique("REPO")
    events = InMemoryTracer()
    seen: dict[str, list[Any]] = {"async": [], "swallow": [], "plain": [], "to_the_end": []}
    servers = [fleet.service(repo, h, tracer=events if h == "h1" else None) for h in ("h1", "h2")]
    for svc in servers:

        @svc.handler("stall")
        async def stall(_: Any = None) -> str:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                seen["async"].append(gear.remaining_budget())
                raise
            return "finished"

        @svc.handler("swallow")
        async def swallow(_: Any = None) -> str:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                seen["swallow"].append("cancelled")
            return "answer nobody waits for"

        @svc.handler("crunch")
        def crunch(_: Any = None) -> str:  # plain: cannot be interrupted, watches the flag instead
            budget = gear.remaining_budget()
            while not gear.cancelled():
                time.sleep(0.01)
            seen["plain"].append((budget, gear.remaining_budget()))
            return "too late"

        @svc.handler("to_the_end", cancel_at_deadline=False)
        async def to_the_end(_: Any = None) -> str:
            await asyncio.sleep(0.6)
            seen["to_the_end"].append(gear.cancelled())
            return "late but sent"

    web = fleet.client()
    await fleet.start()
    h1 = f"{repo}.h1"
    calls = [web.rpc.call(h1, method, timeout=1.0) for method in ("stall", "swallow", "crunch")]
    for outcome in await asyncio.gather(*calls, return_exceptions=True):
        assert isinstance(outcome, gear.CallTimeoutError)
    await eventually(lambda: servers[0].stats["cancelled"] == 3, what="three runs given up")
    assert len(seen["async"]) == 1
    assert seen["async"][0] <= 0.0  # cancelled at the deadline, not before (and long before 30 s)
    assert seen["swallow"] == ["cancelled"]
    budget_at_start, budget_at_end = seen["plain"][0]
    assert 0 < budget_at_start <= 1.0
    assert budget_at_end <= 0
    cancelled = events.named(EventName.CANCELLED)
    assert sorted(e.attributes.rpc_method or "" for e in cancelled) == ["crunch", "stall", "swallow"]
    assert all(e.attributes.error_type == "deadline" for e in cancelled)
    assert not events.named(EventName.REPLY_SENT)  # none of them replied
    assert web.stats["late_replies"] == 0

    # opting out: the handler runs to its end and its (late) reply is sent
    with pytest.raises(gear.CallTimeoutError):
        await web.rpc.call(f"{repo}.h2", "to_the_end", timeout=0.3)
    await eventually(lambda: web.stats["late_replies"] == 1, what="the late reply")
    assert seen["to_the_end"] == [False]
    assert servers[1].stats["cancelled"] == 0
    # the instances keep serving
    with pytest.raises(gear.CallTimeoutError):
        await web.rpc.call(repo, "stall", timeout=0.2)


class Census(BaseModel):
    repos: list[str]


def _repo(fleet: Fleet, repo: str, host: str, seen: dict[str, Any]) -> gear.Service:
    svc = fleet.service(repo, host)

    @svc.handler("get")
    async def get(key: str) -> Item:
        seen.setdefault("repo_deadlines", []).append(gear.current_deadline())
        return Item(key=key, value=f"{key}@{host}")

    @svc.handler("stall")
    async def stall(_: Any = None) -> None:
        await asyncio.sleep(30)

    @svc.handler("note")
    async def note(text: str) -> None:
        seen.setdefault("notes", []).append(text)

    @svc.handler("status")
    async def status(_: Any = None) -> str:
        return host

    return svc


async def test_plain_handlers_make_nested_calls_through_the_sync_facade(fleet: Fleet) -> None:
    ctrl, repo = unique("CTRL"), unique("REPO")
    seen: dict[str, Any] = {}
    for host in ("h1", "h2"):
        _repo(fleet, repo, host, seen)
    c = fleet.service(ctrl, "c1", handler_threads=4)
    fleet.service(ctrl, "c2")

    @c.handler("page")
    def page(key: str) -> dict[str, Any]:
        seen["ctrl_deadline"] = gear.current_deadline()
        seen["ctrl_thread"] = threading.current_thread().name
        item = c.rpc.sync.call_as(Item, f"{repo}.h1", "get", key)
        confirmed = c.rpc.sync.cast(f"{repo}.h2", "note", key)
        replies = c.rpc.sync.gather(f"{repo}.*", "status", expected=2)
        inner = c.rpc.sync.call(f"{ctrl}.c1", "inner", key)  # this instance's own loop answers it
        return {
            "value": item.value,
            "cast": confirmed,
            "census": sorted(r.result for r in replies),
            "inner": inner,
        }

    @c.handler("inner")
    async def inner(key: str) -> str:
        return key[::-1]

    @c.handler("errors")
    def errors(_: Any = None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        try:
            c.rpc.sync.call(f"{repo}.h1", "no-such-method")
        except gear.MethodNotFoundError as exc:
            out["missing"] = type(exc).__name__
        try:
            c.rpc.sync.call_as(Census, f"{repo}.h1", "get", "k")
        except gear.BadResultError as exc:
            out["bad_result"] = exc.details["errors"][0]["loc"]
        try:
            c.rpc.sync.call(f"{repo}.h1", "stall", timeout=60)  # the served request's 4 s win
        except gear.CallTimeoutError as exc:
            out["timeout"] = type(exc).__name__
        return out

    web = fleet.client()
    await fleet.start()
    before = time.time()
    got = await web.rpc.call(f"{ctrl}.c1", "page", "alice", timeout=4)
    assert got == {"value": "alice@h1", "cast": True, "census": ["h1", "h2"], "inner": "ecila"}
    assert seen["ctrl_thread"].startswith("gear-")
    assert seen["ctrl_deadline"] == pytest.approx(before + 4, abs=0.5)
    # the nested call inherited the served request's deadline, minus the margin kept for the reply:
    # a tenth of the 4 s left (under NESTED_MARGIN's 0.5 s cap)
    assert seen["ctrl_deadline"] - 0.45 < seen["repo_deadlines"][0] < seen["ctrl_deadline"] - 0.3
    await eventually(lambda: seen.get("notes") == ["alice"])

    # (had the nested call not inherited the 4 s, this call would time out instead of answering; the
    # handler keeps a tenth of them to answer, room for a full garbage collection on the way back)
    out = await web.rpc.call(f"{ctrl}.c1", "errors", timeout=4.0)
    assert out == {"missing": "MethodNotFoundError", "bad_result": ["repos"], "timeout": "CallTimeoutError"}

    # several at once: each blocks only its own worker thread, never the event loop
    many = await asyncio.gather(*(web.rpc.call(ctrl, "page", f"k{i}", timeout=8) for i in range(6)))
    assert [m["inner"] for m in many] == [f"{i}k" for i in range(6)]


async def test_sync_facade_refuses_the_event_loop_thread_and_a_stopped_service(fleet: Fleet) -> None:
    web = fleet.client()
    with pytest.raises(gear.ConnectionLostError, match="not running"):
        await asyncio.to_thread(web.rpc.sync.call, "REPO.h1", "get")
    await fleet.start()
    with pytest.raises(gear.ConfigurationError, match="event loop"):
        web.rpc.sync.call("REPO.h1", "get")
    with pytest.raises(gear.ConfigurationError):  # bad input: the same error as the async API
        await asyncio.to_thread(web.rpc.sync.call, "bad.address.form", "get")
    with pytest.raises(gear.UnroutableError):  # from any thread of the process, not only handlers
        await asyncio.to_thread(web.rpc.sync.call, f"{unique('REPO')}.gone", "get", timeout=0.3)


class Report(BaseModel):
    host: str
    items: list[int]


async def test_a_result_that_does_not_fit_result_type_is_a_gear_error(fleet: Fleet) -> None:
    repo = unique("REPO")
    for host in ("h1", "h2"):
        svc = fleet.service(repo, host)

        @svc.handler("report")
        async def report(items: Any) -> dict[str, Any]:
            return {"host": "h", "items": items}

    web = fleet.client()
    await fleet.start()
    ok = await web.rpc.call_as(Report, f"{repo}.h1", "report", [1, 2])
    assert ok == Report(host="h", items=[1, 2])

    with pytest.raises(gear.BadResultError) as info:
        await web.rpc.call_as(Report, f"{repo}.h2", "report", ["x"])
    err = info.value
    assert isinstance(err, gear.GearError)
    assert err.method == "report"
    assert err.address == f"{repo}.h2"
    assert err.result == {"host": "h", "items": ["x"]}
    assert err.details["errors"][0]["loc"] == ["items", 0]

    got: asyncio.Queue[Any] = asyncio.Queue()
    await web.rpc.call_with_callback(repo, "report", ["y"], result_type=Report, callback=got.put_nowait)
    value = await asyncio.wait_for(got.get(), 5)
    assert isinstance(value, gear.BadResultError)
    assert value.details["errors"][0]["input"] == "y"

    class NotAModel:
        pass

    with pytest.raises(gear.ConfigurationError, match="result_type"):  # before any I/O
        await web.rpc.call_as(NotAModel, repo, "report", [])

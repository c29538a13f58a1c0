"""The four address forms route exactly as the table says, with isolation between instances."""

from __future__ import annotations

import asyncio
from collections import Counter

from tests.conftest import unique
from tests.fleet import Fleet, eventually


def _recording(fleet: Fleet, type_: str, host: str, seen: Counter[str]) -> None:
    svc = fleet.service(type_, host)

    @svc.handler("ping")
    async def ping(tag: str) -> str:
        seen[f"{svc.identity}:{tag}"] += 1
        return svc.identity


async def test_four_forms_and_isolation(fleet: Fleet) -> None:
    ctrl, web = unique("CTRL"), unique("WEB")
    seen: Counter[str] = Counter()
    for type_, host in ((ctrl, "h1"), (ctrl, "h2"), (web, "h1")):
        _recording(fleet, type_, host, seen)
    caller = fleet.client()
    await fleet.start()
    c1, c2, w1 = f"{ctrl}.h1", f"{ctrl}.h2", f"{web}.h1"

    # point-to-point: only that instance, never its sibling
    assert await caller.rpc.call(c2, "ping", "p2p") == c2
    await caller.rpc.cast(c2, "ping", "p2p-cast")
    await eventually(lambda: seen[f"{c2}:p2p-cast"] == 1)

    # multicast: every CTRL instance once, no WEB instance
    await caller.rpc.cast(f"{ctrl}.*", "ping", "multi")
    await eventually(lambda: seen[f"{c1}:multi"] == 1 and seen[f"{c2}:multi"] == 1)

    # broadcast: every instance of every type once
    await caller.rpc.cast("*.*", "ping", "all")
    await eventually(lambda: all(seen[f"{i}:all"] >= 1 for i in (c1, c2, w1)))

    # stateless: exactly one instance per call, round-robin over both
    answers = [await caller.rpc.call(ctrl, "ping", f"rr{i}") for i in range(6)]
    assert set(answers) == {c1, c2}
    for i in range(6):
        assert seen[f"{c1}:rr{i}"] + seen[f"{c2}:rr{i}"] == 1

    # gather over TYPE.* and *.* sees each instance exactly once
    replies = await caller.rpc.gather(f"{ctrl}.*", "ping", "g1", timeout=2, expected=2)
    assert sorted(r.sender for r in replies) == [c1, c2]
    # returns at the third reply (a fixed 1 s window missed replies on a loaded machine)
    everyone = await caller.rpc.gather("*.*", "ping", "g2", timeout=10, expected=3)
    senders = [r.sender for r in everyone]
    assert {c1, c2, w1} <= set(senders)
    assert len(senders) == len(set(senders))

    await asyncio.sleep(0.2)  # give any stray delivery a chance to show up before checking isolation
    assert all(seen[f"{i}:g2"] == 1 for i in (c1, c2, w1))  # once each, none delivered twice
    assert seen[f"{c1}:p2p"] == 0
    assert seen[f"{c1}:p2p-cast"] == 0
    assert seen[f"{w1}:multi"] == 0
    assert all(n == 1 for n in seen.values()), seen


async def test_topology_matches_the_declared_data(fleet: Fleet) -> None:
    t = unique("REPO")
    svc = fleet.service(t, "h7")

    @svc.handler("x")
    def x() -> None:
        return None

    await fleet.start()
    topo = svc.topology
    assert topo.type_queue is not None
    assert topo.type_queue.name == t
    assert topo.host_queue.name == f"{t}.h7"
    assert topo.host_queue.arguments["x-expires"] == 120_000
    assert {b.routing_key for b in topo.bindings} == {t, f"{t}.h7", f"{t}.@all", "@all.@all"}

    cli = fleet.client()
    await cli.start()
    ping = await cli.rpc.gather(f"{t}.*", "gear.ping", timeout=2, expected=1)
    assert [r.result["instance"] for r in ping] == [f"{t}.h7"]
    assert ping[0].result["methods"] == ["x"]

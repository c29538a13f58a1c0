"""The cluster backend works: every node serves, quorum queues replicate, nodes go and come back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiormq
import pytest
from aiormq import spec

import gear
from tests.cluster._cluster import START_TIMEOUT, ClusterHandle, run_script
from tests.conftest import unique

# the first test of a session may boot the cluster (about 25 s) inside its setup
pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

PERSISTENT = spec.Basic.Properties(delivery_mode=2)
QUORUM: dict[str, Any] = {"x-queue-type": "quorum"}


async def _channel(url: str) -> aiormq.abc.AbstractChannel:
    conn = await asyncio.wait_for(aiormq.connect(url), 10)
    return await conn.channel()


@pytest.fixture
async def quorum_queue(cluster: ClusterHandle) -> AsyncIterator[str]:
    """A quorum queue declared through node 1, deleted afterwards."""
    name = unique("cluster-smoke-")
    ch = await _channel(cluster.urls[0])
    await ch.queue_declare(name, durable=True, arguments=QUORUM)
    await ch.connection.close()
    try:
        yield name
    finally:
        await cluster.heal_async()
        ch = await _channel(cluster.urls[0])
        await ch.queue_delete(name)
        await ch.connection.close()


async def _drain(url: str, queue: str) -> list[bytes]:
    """Take every message from ``queue`` through ``url`` (confirmed ones are all there already)."""
    ch = await _channel(url)
    bodies: list[bytes] = []
    try:
        while (got := await ch.basic_get(queue, no_ack=True)).delivery_tag is not None:
            bodies.append(got.body)
    finally:
        await ch.connection.close()
    return bodies


async def _publish_until_confirmed(url: str, queue: str, body: bytes, limit: float) -> int:
    """Publish ``body`` until the broker acks it (bounded by ``limit``); the number of nacks.

    Each attempt uses a fresh channel: on RabbitMQ 3.10 a channel whose first publish to a quorum queue
    meets a leader that was just killed can stay stuck, nacking every later publish to it for minutes,
    while a channel opened a second later works (docs/cluster-instance-queues.md).
    """
    loop = asyncio.get_running_loop()
    end = loop.time() + limit
    nacks = 0
    while True:
        ch = await _channel(url)
        try:
            await asyncio.wait_for(ch.basic_publish(body, routing_key=queue, properties=PERSISTENT), limit)
            return nacks
        except aiormq.exceptions.DeliveryError:
            nacks += 1
            if loop.time() > end:
                raise
            await asyncio.sleep(0.2)
        finally:
            await ch.connection.close()


async def test_every_node_serves_one_cluster_and_quorum_queues_span_all_nodes(
    cluster: ClusterHandle, quorum_queue: str
) -> None:
    for url in cluster.urls:  # declared through node 1, the queue exists on every node
        ch = await _channel(url)
        ok = await ch.queue_declare(quorum_queue, passive=True)
        await ch.connection.close()
        assert ok.message_count == 0

    sender = await _channel(cluster.urls[0])
    confirm = await sender.basic_publish(b"m1", routing_key=quorum_queue, properties=PERSISTENT)
    await sender.connection.close()
    assert isinstance(confirm, spec.Basic.Ack)
    assert await _drain(cluster.urls[2], quorum_queue) == [b"m1"]

    info = await cluster.queue_info(2, quorum_queue, "type", "members", "online")
    assert info is not None
    assert info["type"] == "quorum"
    assert sorted(info["members"]) == sorted(cluster.nodes)


@pytest.mark.parametrize("loss", ["stop_app", pytest.param("kill", marks=pytest.mark.slow)])
async def test_a_quorum_queue_serves_while_its_leader_node_is_down_and_the_node_comes_back(
    cluster: ClusterHandle, quorum_queue: str, loss: str
) -> None:
    info = await cluster.queue_info(1, quorum_queue, "leader")
    assert info is not None
    leader = cluster.number_of(info["leader"])
    survivor = cluster.urls[leader % 3]  # the next node
    sender = await _channel(survivor)
    assert isinstance(
        await sender.basic_publish(b"before", routing_key=quorum_queue, properties=PERSISTENT), spec.Basic.Ack
    )
    await sender.connection.close()

    await (cluster.stop_app(leader) if loss == "stop_app" else cluster.kill(leader))
    # confirmed once a new leader (elected among the two survivors) has it on a majority; while the
    # election runs the broker may nack it (seen after kill -9), and a client publishes again
    nacks = await _publish_until_confirmed(survivor, quorum_queue, b"during", limit=30)
    print(f"publishes nacked during the election after {loss}: {nacks}")
    bodies = await _drain(survivor, quorum_queue)
    assert bodies[0] == b"before"
    assert set(bodies[1:]) == {b"during"}  # a nacked publish may still have been enqueued

    await (cluster.start_app(leader) if loss == "stop_app" else cluster.restart(leader))
    gone = cluster.nodes[leader - 1]
    for _ in range(60):  # the returned node rejoins the queue's Raft group as an online member
        info = await cluster.queue_info(leader, quorum_queue, "online")
        if info is not None and gone in info["online"]:
            break
        await asyncio.sleep(0.5)
    assert info is not None
    assert gone in info["online"], f"{gone} not back in the queue's online members: {info}"


def _where_server(type_: str, host: str, **kw: Any) -> gear.Service:
    svc = gear.Service(type_, host, **kw)

    @svc.handler("where")
    async def where() -> str:
        return host

    return svc


async def test_gear_instances_on_different_nodes_reach_each_other(cluster: ClusterHandle) -> None:
    type_, exchange = unique("CSMOKE"), unique("gear-cluster-smoke-")
    common: dict[str, Any] = {"exchange": exchange, "quorum": True, "timeout": 10.0, "connect_wait": 20.0}
    servers = [_where_server(type_, f"h{n}", url=cluster.urls_from(n), **common) for n in (1, 2, 3)]
    caller = gear.Service(unique("CCALL"), "c1", url=cluster.urls_from(2), serve=False, **common)
    try:
        for svc in (*servers, caller):
            await svc.start()
        assert [await caller.rpc.call(f"{type_}.h{n}", "where") for n in (1, 2, 3)] == ["h1", "h2", "h3"]
        assert await caller.rpc.call(type_, "where") in {"h1", "h2", "h3"}
        replies = await caller.rpc.gather(f"{type_}.*", "where", timeout=10, expected=3)
        assert sorted(r.result for r in replies) == ["h1", "h2", "h3"]
        info = await cluster.queue_info(3, type_, "type", "members")
        assert info is not None
        assert info["type"] == "quorum"
        assert sorted(info["members"]) == sorted(cluster.nodes)
    finally:
        for svc in (caller, *servers):
            await svc.stop()
        ch = await _channel(cluster.urls[0])
        for name in sorted({q.name for s in (*servers, caller) for q in s.topology.queues}):  # @dead ones too
            await ch.queue_delete(name)
        await ch.exchange_delete(exchange)
        await ch.connection.close()


@pytest.mark.slow
async def test_start_makes_a_half_cluster_whole_by_booting_it_afresh(cluster: ClusterHandle) -> None:
    """A `start` that meets nodes of ours left half-done (a killed node, a failed earlier start) gives a
    whole cluster, not a refusal: CI's test session starts the cluster after a background start."""
    await cluster.kill(3)
    done = await asyncio.to_thread(run_script, "start", timeout=START_TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert "the cluster is not whole: stopping them to boot it afresh" in done.stdout
    assert "cluster up in" in done.stdout
    status = await asyncio.to_thread(run_script, "status")
    assert status.returncode == 0, status.stdout
    cluster.disturbed.discard(3)
    ch = await _channel(cluster.urls[2])  # the killed node serves again
    await ch.connection.close()

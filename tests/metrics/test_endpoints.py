"""A running service's operator port: what /metrics counts against the calls made, /livez, /readyz."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

import gear
from gear.metrics.health import LIVENESS_TIMEOUT
from tests.fleet import Fleet, eventually
from tests.metrics._scrape import aget, get, readyz, samples, value


async def test_metrics_count_the_calls_made_by_method_route_and_error(fleet: Fleet) -> None:
    repo = fleet.service("REPO", "r1", metrics_port=0)
    client = fleet.client(metrics_port=0)

    @repo.handler("put")
    async def put(item: dict) -> dict:
        if item.get("fail"):
            raise KeyError("no such item")
        return item

    @repo.handler("note")
    async def note(item: dict) -> None:
        return None

    await fleet.start()
    for i in range(7):
        await client.rpc.call("REPO", "put", {"i": i})
    for _ in range(2):
        with pytest.raises(gear.RemoteError):
            await client.rpc.call("REPO.r1", "put", {"fail": True})
    with pytest.raises(gear.MethodNotFoundError):
        await client.rpc.call("REPO", "missing", {})
    await client.rpc.cast("REPO", "note", {})
    await eventually(lambda: repo.stats["handlers_in_flight"] == 0)

    assert client.metrics_port is not None
    assert repo.metrics_port is not None
    seen = await samples(client.metrics_port)
    calls = "rpc_client_call_duration_seconds_count"
    assert value(seen, calls, rpc_method="REPO/put", gear_route="type", error_type="") == 7
    assert value(seen, calls, rpc_method="REPO/put", gear_route="type_host", error_type="KeyError") == 2
    assert value(seen, calls, rpc_method="REPO/missing", error_type="MethodNotFound") == 1
    sent = "messaging_client_sent_messages_total"
    assert value(seen, sent, gear_rpc_kind="call", error_type="") == 10
    assert value(seen, sent, gear_rpc_kind="cast", messaging_destination_name=f"{fleet.exchange}:REPO") == 1
    assert value(seen, "messaging_client_consumed_messages_total", gear_rpc_kind="reply") == 10

    found = await samples(repo.metrics_port)
    server = "rpc_server_call_duration_seconds_count"
    assert value(found, server, rpc_method="REPO/put", error_type="") == 7
    assert value(found, server, rpc_method="REPO/put", error_type="KeyError") == 2
    assert value(found, server, rpc_method="_OTHER", error_type="MethodNotFound") == 1
    assert value(found, "messaging_process_duration_seconds_count", rpc_method="REPO/note") == 1
    consumed = "messaging_client_consumed_messages_total"
    assert value(found, consumed, messaging_destination_template="REPO", gear_rpc_kind="call") == 8
    assert value(found, consumed, messaging_destination_template="REPO.{host}", gear_rpc_kind="call") == 2
    assert value(found, "messaging_client_sent_messages_total", gear_rpc_kind="reply") == 10
    assert value(found, "gear_link_up") == 1
    assert value(found, "gear_ready") == 1
    assert value(found, "gear_link_state", gear_link_state="ready") == 1


async def test_handlers_cancelled_at_their_deadline_and_duplicates_are_counted(fleet: Fleet) -> None:
    repo = fleet.service("REPO", "r1", metrics_port=0)
    client = fleet.client()

    @repo.handler("slow")
    async def slow(_: dict) -> None:
        await asyncio.sleep(5)

    await fleet.start()
    with pytest.raises(gear.CallTimeoutError):
        await client.rpc.call("REPO", "slow", {}, timeout=0.3)
    await eventually(lambda: repo.stats["cancelled"] == 1)
    assert repo.metrics_port is not None
    found = await samples(repo.metrics_port)
    assert value(found, "gear_server_cancelled_total") == 1
    assert (
        value(found, "rpc_server_call_duration_seconds_count", rpc_method="REPO/slow", error_type="deadline")
        == 1
    )


async def test_livez_answers_while_the_loop_runs_and_not_when_it_is_stuck(fleet: Fleet) -> None:
    repo = fleet.service("REPO", "r1", metrics_port=0)
    await fleet.start()
    assert repo.metrics_port is not None
    assert await aget(repo.metrics_port, "/livez") == (200, "ok\n")
    assert (await aget(repo.metrics_port, "/nowhere"))[0] == 404

    loop = asyncio.get_running_loop()
    probe = loop.run_in_executor(None, _status_later, repo.metrics_port, "/livez")
    time.sleep(LIVENESS_TIMEOUT + 1.0)  # noqa: ASYNC251 - the point: the loop is stuck, as a blocking call would
    assert await probe == 503
    assert await aget(repo.metrics_port, "/livez") == (200, "ok\n")


def _status_later(port: int, path: str) -> int:
    time.sleep(0.3)  # asked once the loop is stuck
    return get(port, path)[0]


async def test_readyz_says_why_an_instance_is_not_ready(fleet: Fleet) -> None:
    repo = fleet.service("REPO", "r1", metrics_port=0)
    await fleet.start()
    assert repo.metrics_port is not None
    status, body = await readyz(repo.metrics_port)
    assert (status, body["ready"], body["reasons"], body["state"]) == (200, True, [], "ready")
    assert body["instance"] == repo.identity

    link = repo._connector.link
    assert link is not None
    await link.stop_consuming(repo.topology.host_queue.name)  # as if the broker had cancelled it
    status, body = await readyz(repo.metrics_port)
    assert status == 503
    assert body["reasons"] == [f"consumer of {repo.topology.host_queue.name!r} not attached"]

    repo._request_stop()  # what SIGTERM does under run_forever
    status, body = await readyz(repo.metrics_port)
    assert status == 503
    assert body["reasons"][0] == "stopping"


async def test_the_port_is_released_at_stop_and_a_taken_port_fails_start(fleet: Fleet) -> None:
    repo = fleet.service("REPO", "r1", metrics_port=0)
    await repo.start()
    port = repo.metrics_port
    assert port is not None
    other = fleet.service("REPO", "r2", metrics_port=port, metrics_bind="127.0.0.1")
    with pytest.raises(OSError, match="in use"):
        await other.start()
    await repo.stop()
    assert repo.metrics_port is None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))  # free again


async def test_without_a_port_no_meter_is_set(fleet: Fleet) -> None:
    repo = fleet.service("REPO", "r1")
    await fleet.start()
    assert repo.metrics_port is None
    assert repo._events.meter is None or not isinstance(repo._events.meter, gear.metrics.Recorder)

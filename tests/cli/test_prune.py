"""``gear prune``: retired TYPE queues and unbound exchanges listed, removed on request, the served and the
full ones kept; and the reference broker's management API that it reads."""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.request
from typing import Any

import pytest
from typer.testing import CliRunner, Result

import gear
from gear.broker import Broker
from gear.cli.main import app
from gear.cli.output import ExitCode
from gear.link.admin import delete_queues
from gear.link.connection import connect
from gear.ops.management import Management
from gear.ops.prune import Retired, find_retired, remove_retired
from tests.backends import RabbitMQ
from tests.conftest import unique


async def _prune(url: str, management: str, *args: str) -> Result:
    command = ["prune", "--url", url, "--management", management, *args]
    return await asyncio.to_thread(CliRunner().invoke, app, command)


async def _unbound_exchange(url: str, name: str) -> None:
    from gear.wire import spec

    conn = await connect(url, heartbeat=0, name="test", handshake_timeout=5)
    channel = await conn.channel()
    await channel.call(spec.Exchange.Declare(exchange=name, exchange_type="topic", durable=True))
    await conn.close(5)


async def test_prune_lists_then_removes_what_no_instance_serves_and_keeps_the_rest() -> None:
    old, full, live, demo = unique("OLD"), unique("FULL"), unique("LIVE"), unique("demo-x")
    async with Broker(port=0, management_port=0) as broker:
        management = f"http://127.0.0.1:{broker.management_port}/"
        for type_ in (old, full):
            async with gear.Service(type_, "h1", url=broker.url, serve=True):
                pass
        await _unbound_exchange(broker.url, demo)
        async with (
            gear.Service(live, "h1", url=broker.url, serve=True),
            gear.Service.client(url=broker.url) as client,
        ):
            await client.rpc.cast(full, "work", {"n": 1})  # waits in FULL's queue: nobody serves it

            listed = await _prune(broker.url, management, "--json")
            assert listed.exit_code == ExitCode.OK, listed.output
            retired = {(r["kind"], r["name"]): r["messages"] for r in json.loads(listed.stdout)["retired"]}
            assert retired == {("queue", old): 0, ("queue", full): 1, ("exchange", demo): 0}
            shown = await _prune(broker.url, management)
            assert f"{full}" in shown.stdout
            assert "dry run" in shown.stdout

            removed = await _prune(broker.url, management, "--remove")
            assert removed.exit_code == ExitCode.CHECK_FAILED
            assert f"removed queue {old}\n" in removed.stdout
            assert f"removed exchange {demo}\n" in removed.stdout
            assert f"kept queue {full}: holds 1 message(s)" in removed.stdout
            assert removed.stderr.strip().count("\n") == 0  # one line

            gone = await _prune(broker.url, management, "--remove", "--with-messages", "--json")
            assert gone.exit_code == ExitCode.OK, gone.output
            assert [(r["name"], r["removed"]) for r in json.loads(gone.stdout)["results"]] == [(full, True)]
            assert (await _prune(broker.url, management)).stdout.startswith("nothing retired")
            _, queues = await asyncio.to_thread(_get, broker.management_port, "/api/queues/%2F")
            assert live in {q["name"] for q in queues}  # the served type was left alone


async def test_prune_without_a_management_api_says_so_in_one_line() -> None:
    async with Broker(port=0) as broker:
        result = await _prune(broker.url, "http://127.0.0.1:1/")
    assert result.exit_code == ExitCode.CONNECT
    assert result.stderr.startswith("gear: no management API at http://127.0.0.1:1/")
    assert result.stderr.count("\n") == 1


def _get(port: int, path: str, user: str = "guest", password: str = "guest") -> tuple[int, Any]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Basic {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


async def test_the_reference_brokers_management_api_answers_as_rabbitmqs_does() -> None:
    type_ = unique("API")
    async with (
        Broker(port=0, management_port=0) as broker,
        gear.Service(type_, "h1", url=broker.url, serve=True),
    ):
        port = broker.management_port
        status, queues = await asyncio.to_thread(_get, port, "/api/queues/%2F")
        assert status == 200
        mine = {q["name"]: q for q in queues}
        assert mine[type_]["consumers"] == 1
        assert mine[type_]["durable"] is True
        assert mine[f"{type_}.h1"]["arguments"]["x-expires"] == 600_000
        status, bindings = await asyncio.to_thread(_get, port, "/api/bindings/%2F")
        assert {"source": "gear", "vhost": "/", "destination": type_, "destination_type": "queue",
                "routing_key": type_, "arguments": {}} in bindings  # fmt: skip
        status, exchanges = await asyncio.to_thread(_get, port, "/api/exchanges/%2F")
        assert any(e["name"] == "gear" and e["type"] == "topic" and e["durable"] for e in exchanges)
        assert (await asyncio.to_thread(_get, port, "/api/queues/%2F", "guest", "wrong"))[0] == 401
        assert (await asyncio.to_thread(_get, port, "/api/queues/nowhere"))[0] == 404
        assert (await asyncio.to_thread(_get, port, "/api/nodes"))[0] == 404
        api = Management.for_amqp_url(broker.url, f"http://127.0.0.1:{port}/")
        assert Retired("queue", type_) not in await asyncio.to_thread(find_retired, api)


@pytest.mark.rabbitmq
async def test_prune_finds_and_removes_a_retired_type_on_rabbitmq(rabbitmq: RabbitMQ) -> None:
    """Only what this test made is removed: on a shared broker the listing has other users' queues."""
    if rabbitmq.management_url is None:
        pytest.skip("no management API known for this RabbitMQ (GEAR_TEST_MANAGEMENT_URL)")
    old = unique("OLD")
    async with gear.Service(old, "h1", url=rabbitmq.url, serve=True):
        pass
    api = Management.for_amqp_url(rabbitmq.url, rabbitmq.management_url)
    mine = [r for r in await asyncio.to_thread(find_retired, api) if r.name == old]
    assert mine == [Retired("queue", old, 0)]
    done = await remove_retired(rabbitmq.url, mine)
    assert [(d.item.name, d.removed) for d in done] == [(old, True)]
    assert old not in {r.name for r in await asyncio.to_thread(find_retired, api)}
    await delete_queues(rabbitmq.url, [f"{old}.h1"])

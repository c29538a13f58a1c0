"""A broker restart: every connection drops and the listener goes away, then the services carry on."""

from __future__ import annotations

import asyncio

import pytest

from tests.backends import ENV_CLOSE_ALL
from tests.conftest import unique
from tests.sdk.conftest import Fleet, eventually


async def test_services_reconnect_and_serve_after_a_broker_restart(fleet: Fleet) -> None:
    if not fleet.broker.exclusive:
        pytest.skip(f"restarting a shared RabbitMQ disturbs its other users; set {ENV_CLOSE_ALL}=1")
    repo = unique("REPO")
    server = fleet.service(repo, "h1", reconnect_initial=0.05, reconnect_max=0.5)

    @server.handler("echo")
    async def echo(n: int) -> int:
        return n

    web = fleet.service(unique("WEB"), "w1", serve=False, reconnect_initial=0.05, reconnect_max=0.5)
    await fleet.start()
    assert await web.rpc.call(f"{repo}.h1", "echo", 1) == 1

    await fleet.broker.restart()
    # A call made right away waits for the reconnect (and the server's redeclared queue) within its deadline.
    assert await web.rpc.call(f"{repo}.h1", "echo", 2, timeout=20) == 2
    await eventually(lambda: server.connected and web.connected, limit=20, what="both reconnected")
    assert web.stats["reconnects"] >= 1
    assert server.stats["reconnects"] >= 1
    replies = await asyncio.gather(*(web.rpc.call(f"{repo}.h1", "echo", i, timeout=10) for i in range(20)))
    assert replies == list(range(20))

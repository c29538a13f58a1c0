"""The WEB example's small HTTP front end, on top of the running system."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from gear.examples.system import running_system
from gear.examples.web import start_http
from tests.backends import BrokerHandle


async def _request(port: int, verb: str, path: str, body: str = "") -> tuple[int, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = body.encode()
    writer.write(f"{verb} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
    await writer.drain()
    raw = await reader.read()
    writer.close()
    await writer.wait_closed()
    head, _, payload = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(payload)


async def test_http_front_end_uses_every_address_form(broker: BrokerHandle) -> None:
    if not broker.is_reference:
        pytest.skip("HTTP parsing does not depend on the broker; routing on RabbitMQ is in test_system")
    async with running_system(broker.url) as system:
        server = await start_http(system.web, 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            code, stored = await _request(port, "PUT", "/items/alice", "tea")
            assert (code, stored["host"]) == (200, "repo1")
            code, found = await _request(port, "GET", "/items/alice")
            assert code == 200
            assert found["value"] == "tea"
            assert found["ctrl_host"] in {"ctrl1", "ctrl2"}
            assert (await _request(port, "POST", "/reload", "5"))[0] == 202
            assert (await _request(port, "POST", "/refresh"))[0] == 202
            code, statuses = await _request(port, "GET", "/status")
            assert code == 200
            assert len(statuses) == len(system.services)
            assert (await _request(port, "GET", "/nowhere"))[0] == 404
            assert (await _request(port, "POST", "/reload", "seven"))[0] == 400
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /status HTTP/1.1\r\nContent-Length: lots\r\n\r\n")
            assert (await reader.read()).startswith(b"HTTP/1.1 400")
            writer.close()
            await writer.wait_closed()

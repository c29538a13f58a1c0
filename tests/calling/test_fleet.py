"""A fleet of a few hundred instances of one TYPE: every address form reaches them, and after the broker
restarts every one of them serves again (the fast version of ``benchmarks/fleet.py``)."""

from __future__ import annotations

import random

import pytest

import gear
from gear.testing import Fleet
from tests.backends import BrokerHandle
from tests.conftest import unique

SIZE = 200


@pytest.mark.timeout(120)
async def test_a_fleet_answers_every_address_form_and_comes_back_after_a_restart(
    broker: BrokerHandle,
) -> None:
    if not broker.is_reference and not broker.exclusive:
        pytest.skip("restarting a shared RabbitMQ disturbs its other users; set GEAR_TEST_DISRUPTIVE=1")
    type_ = unique("FLEET")
    async with Fleet(broker.url, type_, SIZE) as fleet, gear.Service.client(url=broker.url) as client:
        replies = await client.rpc.gather(f"{type_}.*", "echo", "hi", timeout=20, expected=SIZE)
        assert sorted(r.sender for r in replies) == sorted(fleet.hosts)
        for host in random.sample(fleet.hosts, 20):
            assert await client.rpc.call(host, "echo", host) == host
        assert await client.rpc.call(type_, "echo", 1) == 1
        await client.rpc.cast(f"{type_}.*", "note")
        assert await fleet.wait_casts(SIZE, within=20) == SIZE

        await broker.restart(down_for=1.0)
        assert await fleet.wait_serving(within=60) == SIZE
        replies = await client.rpc.gather(f"{type_}.*", "echo", "again", timeout=20, expected=SIZE)
        assert len(replies) == SIZE

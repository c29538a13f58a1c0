"""The fault suite's rig: a broker (both backends), a TCP proxy in front of it, servers and a client.

Every scenario runs the same workload (``gear.testing.workload``): point-to-point and round-robin
calls, gathers and persistent casts from one client to two servers, with a fault injected while it
runs. Each scenario then checks the ledger: nothing hung past its deadline, only ``GearError``s, no
confirmed cast lost; duplicates and recovery times are printed, not asserted away.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import gear
from gear.testing import TCPProxy
from gear.testing.workload import Ledger, Workload, serve_workload
from tests.backends import BrokerHandle
from tests.conftest import unique
from tests.fleet import Fleet, eventually

__all__ = ("Rig", "eventually")

HOSTS = ("h1", "h2")


@dataclass
class Rig:
    """Two servers of one TYPE and a client, all connected through ``proxy``."""

    broker: BrokerHandle
    proxy: TCPProxy
    fleet: Fleet
    type_: str
    ledger: Ledger = field(default_factory=Ledger)
    servers: list[gear.Service] = field(default_factory=list)
    client: gear.Service | None = None

    def build(self, *, direct_servers: bool = False, **settings: Any) -> None:
        """Create the services (not started). ``direct_servers``: servers bypass the proxy."""
        settings.setdefault("reconnect_initial", 0.05)
        via_proxy = self.proxy.url(self.broker.url)
        for host in HOSTS:
            url = self.broker.url if direct_servers else via_proxy
            svc = self.fleet.service(self.type_, host, url=url, **settings)
            serve_workload(svc, self.ledger)
            self.servers.append(svc)
        self.client = self.fleet.service(unique("WEB"), "w1", url=via_proxy, serve=False, **settings)

    def workload(self, **kw: Any) -> Workload:
        """The workload from the client to the servers (use as ``async with``)."""
        assert self.client is not None
        return Workload(self.client, self.type_, self.ledger, hosts=HOSTS, **kw)

    def report(self, scenario: str, **extra: Any) -> None:
        """Print the scenario's figures (``pytest -s`` shows them; CI logs keep them)."""
        print(f"\n[{self.broker.kind}] {scenario}: {self.ledger.row()} {extra}")


@pytest.fixture
async def rig(broker: BrokerHandle) -> AsyncIterator[Rig]:
    """A proxy in front of the broker under test, and an empty fleet."""
    fleet = Fleet(broker)
    async with TCPProxy.for_url(broker.url) as proxy:
        try:
            yield Rig(broker, proxy, fleet, unique("REPO"))
        finally:
            await fleet.stop()


@pytest.fixture
async def durable_rig(durable_broker: BrokerHandle) -> AsyncIterator[Rig]:
    """As ``rig``, on a broker that keeps durable state across a restart (a data directory)."""
    fleet = Fleet(durable_broker)
    async with TCPProxy.for_url(durable_broker.url) as proxy:
        try:
            yield Rig(durable_broker, proxy, fleet, unique("REPO"))
        finally:
            await fleet.stop()

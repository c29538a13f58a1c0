"""guest from a non-loopback address: refused as RabbitMQ refuses it (``loopback_users``).

A client in a network namespace (made by the test with ``ip netns`` and a veth pair) connects over
a real non-loopback link. The address rule itself is also tested without namespaces.
"""

from __future__ import annotations

import asyncio
import json
import socket
import textwrap
import urllib.parse
from collections.abc import Iterator

import aiormq
import pytest

from gear.broker import Broker
from tests.security.netns import Namespace, namespace, namespace_unavailable

REFUSED = (
    "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. "
    "For details see the broker logfile."
)
_CLIENT = textwrap.dedent(
    """
    import asyncio, json, aiormq
    async def main(urls):
        out = []
        for url in urls:
            try:
                conn = await asyncio.wait_for(aiormq.connect(url), 10)
                await conn.close()
                out.append("ok")
            except Exception as exc:
                out.append(f"{type(exc).__name__}: {exc.args[0] if exc.args else ''}")
        print(json.dumps(out))
    asyncio.run(main(URLS))
    """
)


@pytest.fixture(scope="module")
def netns() -> Iterator[Namespace]:
    reason = namespace_unavailable()
    if reason is not None:
        pytest.skip(f"no network namespace for a non-loopback client: {reason}")
    with namespace() as ns:
        yield ns


async def _from_namespace(ns: Namespace, urls: list[str]) -> list[str]:
    done = await asyncio.to_thread(ns.python, f"URLS = {urls!r}\n{_CLIENT}")
    assert done.returncode == 0, done.stderr
    result: list[str] = json.loads(done.stdout)
    return result


async def test_guest_is_refused_from_another_host_but_a_user_is_not(netns: Namespace) -> None:
    async with Broker(host=netns.host_ip, port=0, users={"guest": "guest", "alice": "a-secret"}) as broker:
        base = f"{netns.host_ip}:{broker.port}/"
        results = await _from_namespace(
            netns, [f"amqp://guest:guest@{base}", f"amqp://alice:a-secret@{base}"]
        )
        assert results == [f"ProbableAuthenticationError: {REFUSED}", "ok"]
        assert broker.status().failed_logins == 1


async def test_allow_guest_remote_lets_guest_in(netns: Namespace) -> None:
    async with Broker(host=netns.host_ip, port=0, loopback_users=()) as broker:
        assert await _from_namespace(netns, [f"amqp://guest:guest@{netns.host_ip}:{broker.port}/"]) == ["ok"]


@pytest.mark.rabbitmq
async def test_rabbitmq_refuses_guest_from_another_host(
    netns: Namespace, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("rabbitmq").url
    port = urllib.parse.urlsplit(url).port or 5672
    with socket.socket() as probe:
        probe.settimeout(2)
        if probe.connect_ex((netns.host_ip, port)) != 0:
            pytest.skip(
                f"the RabbitMQ under test does not listen on {netns.host_ip} (the shared node listens on "
                "127.0.0.1 only, and its listeners must not be reconfigured by tests)"
            )
    results = await _from_namespace(netns, [f"amqp://guest:guest@{netns.host_ip}:{port}/"])
    assert results == [f"ProbableAuthenticationError: {REFUSED}"]


async def test_guest_from_a_non_loopback_address_of_this_host() -> None:
    """The rule looks at the peer address, not at the machine: 127.0.0.2 is loopback, a LAN IP is not."""
    lan = _a_non_loopback_address()
    if lan is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    async with Broker(host="0.0.0.0", port=0, users={"guest": "guest", "alice": "a-secret"}) as broker:
        with pytest.raises(aiormq.exceptions.ProbableAuthenticationError, match="Login was refused"):
            await aiormq.connect(f"amqp://guest:guest@{lan}:{broker.port}/")
        conn = await aiormq.connect(f"amqp://guest:guest@127.0.0.2:{broker.port}/")
        await conn.close()


def _a_non_loopback_address() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))  # no packet is sent: this only picks the outgoing address
            address = str(s.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") else address

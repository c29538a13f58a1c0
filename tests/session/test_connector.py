"""The connector without a broker: fake links, injected failures, no sockets."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import gear.session.reconnect
from gear.errors import ConnectError
from gear.session.reconnect import Backoff, Connector, ServiceState


class FakeLink:
    """Just enough of :class:`gear.link.Link` for the connector."""

    def __init__(self, where: str = "fake") -> None:
        self.where = where
        self.is_open = True
        self.aborted = 0
        self.closed = 0

    def abort(self) -> None:
        self.aborted += 1
        self.is_open = False

    async def close(self) -> None:
        self.closed += 1
        self.is_open = False


async def _nothing(link: Any, step_done: Any) -> None:
    return None


def _connector(**kw: Any) -> Connector:
    kw.setdefault("urls", ["amqp://a/"])
    kw.setdefault("name", "test")
    kw.setdefault("heartbeat", 5)
    kw.setdefault("handshake_timeout", 1.0)
    kw.setdefault("prefetch", 8)
    kw.setdefault("backoff", Backoff(initial=0.01, maximum=0.02))
    kw.setdefault("connect_wait", 1.0)
    kw.setdefault("set_up", _nothing)
    urls = kw.pop("urls")
    return Connector(urls, **kw)


@pytest.mark.timeout(10)
async def test_a_dead_link_that_is_still_marked_ready_is_retired_not_spun_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The link closed but its close callback has not run: waiting must suspend, not spin."""
    never: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def open_never(*args: Any, **kw: Any) -> Any:
        return await never  # the reconnect started by the retirement never completes

    monkeypatch.setattr(gear.session.reconnect, "open_link", open_never)
    connector = _connector()
    connector.started = True
    link = FakeLink()
    connector.link = link  # type: ignore[assignment]
    connector.ready.set()
    link.is_open = False  # closed under us; ``ready`` still says otherwise
    loop = asyncio.get_running_loop()
    with pytest.raises(TimeoutError):
        await connector.wait_ready(loop.time() + 0.2)
    assert link.aborted == 1
    assert not connector.ready.is_set()
    await connector.close()


@pytest.mark.timeout(10)
async def test_the_reconnect_supervisor_survives_an_unexpected_exception(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    attempts: list[str] = []
    links: list[FakeLink] = []

    async def flaky_open(url: str, events: Any, **kw: Any) -> Any:
        attempts.append(url)
        if len(attempts) == 1:
            raise KeyError("a bug below the supervisor")
        if len(attempts) == 2:
            raise ConnectError("refused")
        link = FakeLink(url)
        links.append(link)
        return link

    monkeypatch.setattr(gear.session.reconnect, "open_link", flaky_open)
    connector = _connector()
    connector.started = True
    first = FakeLink()
    connector.link = first  # type: ignore[assignment]
    connector.ready.set()
    connector.lose(first, "test cut")  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()
    link = await connector.wait_ready(loop.time() + 5)
    assert link is links[0]  # type: ignore[comparison-overlap]  # the fake stands in for a Link
    assert len(attempts) == 3
    assert connector.reconnects == 1
    assert sum("unexpectedly" in r.message for r in caplog.records) == 1
    await connector.close()


@pytest.mark.timeout(10)
async def test_each_setup_step_has_the_whole_bound_and_a_stuck_step_is_given_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Thousands of instances reconnecting at once make every step slow: a setup whose steps each
    finish within the bound goes through however long it takes in all; one stuck step does not."""

    async def open_fake(url: str, events: Any, **kw: Any) -> Any:
        return FakeLink(url)

    async def slow_steps(link: Any, step_done: Any) -> None:
        for _ in range(4):  # 4 x 0.15 s: more than the bound in all, less in each step
            await asyncio.sleep(0.15)
            step_done()

    monkeypatch.setattr(gear.session.reconnect, "open_link", open_fake)
    connector = _connector(handshake_timeout=0.3, set_up=slow_steps)
    await connector.start()
    assert connector.state == ServiceState.READY
    await connector.close()

    async def stuck(link: Any, step_done: Any) -> None:
        step_done()
        await asyncio.sleep(5)

    connector = _connector(handshake_timeout=0.3, connect_wait=0.5, set_up=stuck)
    with pytest.raises(ConnectError, match=r"setup step on .* took longer than 0\.3s"):
        await connector.start()
    await connector.close()


async def test_a_process_opens_links_to_one_broker_a_few_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many instances starting (or reconnecting) at once open their links at most ``OPENING_AT_ONCE``
    at a time per broker, and every one of them gets its turn; another broker has turns of its own."""
    from gear.session.pacing import OPENING_AT_ONCE, opening_turns

    opening = {"amqp://a/": 0, "amqp://b/": 0}
    most = dict(opening)
    full, gate = asyncio.Event(), asyncio.Event()

    async def open_slowly(url: str, *args: Any, **kw: Any) -> Any:
        opening[url] += 1
        most[url] = max(most[url], opening[url])
        if sum(opening.values()) >= 2 * OPENING_AT_ONCE:
            full.set()
        await gate.wait()
        opening[url] -= 1
        return FakeLink(url)

    monkeypatch.setattr(gear.session.reconnect, "open_link", open_slowly)
    many = [
        _connector(urls=[url], connect_wait=5.0)
        for url in ("amqp://a/", "amqp://b/")
        for _ in range(OPENING_AT_ONCE + 20)
    ]
    started = [asyncio.create_task(c.start()) for c in many]
    await full.wait()
    await asyncio.sleep(0.05)  # had the turns let more in, they would be opening now
    gate.set()
    await asyncio.gather(*started)
    assert most == {"amqp://a/": OPENING_AT_ONCE, "amqp://b/": OPENING_AT_ONCE}
    assert all(c.state is ServiceState.READY for c in many)
    assert opening_turns("amqp://u:p@a:5672/other-vhost") is opening_turns("amqp://a/")
    assert opening_turns("amqp://a:5673/") is not opening_turns("amqp://a/")

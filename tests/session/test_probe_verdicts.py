"""When the zombie probe decides. A refused publish makes it check its link at once, busy or not
(``LinkProbe.suspect``): a node whose data disk died refuses every publish with 403 while it still
delivers, so the quiet link the regular probe waits for may never come. A late probe is sent again,
and the link's silence watchdog waits for the second one's confirm: a node cut off sends nothing at
all (no heartbeat either), so its link is dropped once it has been silent for ``dead_after_busy``,
without waiting out the second probe's longer deadline."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from gear.errors import OutcomeUnknownError, PublishRefusedError
from gear.session.probe import LinkProbe
from tests.fleet import eventually


class Link:
    is_open = True

    def __init__(self, unsettled: int = 64) -> None:
        self.unsettled = unsettled  # 64, busy: the regular probe would not run


class Connector:
    def __init__(self, link: Link | None = None) -> None:
        self.link: Link | None = link or Link()
        self.ready = asyncio.Event()
        self.ready.set()
        self.blocked_reason: str | None = None
        self.setup_took = 0.01
        self.lost: list[tuple[Link, str]] = []

    def lose(self, link: Link, why: str) -> None:
        self.lost.append((link, why))
        self.link = Link()


class Publisher:
    def __init__(self, refuses: bool) -> None:
        self.refuses = refuses
        self.sent = 0

    async def publish(self, msg: Any, until: Any, **_: Any) -> bool:
        self.sent += 1
        if self.refuses:
            raise PublishRefusedError(msg.address, 403, "ACCESS_REFUSED - write access refused")
        return True


class SilentNode:
    """A publisher whose node never confirms: each probe ends as sent, outcome unknown."""

    def __init__(self) -> None:
        self.watched: list[bool] = []

    async def publish(self, msg: Any, until: Any, **_: Any) -> bool:
        self.watched.append(msg.watched)
        raise OutcomeUnknownError(msg.address, "no confirm from the broker before the deadline")


@asynccontextmanager
async def _probe(
    connector: Connector, publisher: Publisher | SilentNode, quiet: float = 60.0, probe_timeout: float = 1.0
) -> AsyncIterator[LinkProbe]:
    probe = LinkProbe(
        connector,  # type: ignore[arg-type]
        publisher,  # type: ignore[arg-type]
        "SRV.s1",
        quiet=quiet,
        timeout=probe_timeout,
        longest_quiet=quiet,
    )
    probe.start()
    try:
        yield probe
    finally:
        await probe.stop()


async def test_a_suspected_link_whose_probe_is_refused_too_is_left_at_once() -> None:
    connector, publisher = Connector(), Publisher(refuses=True)
    suspected = connector.link
    async with _probe(connector, publisher) as probe:
        probe.suspect(suspected)
        await eventually(lambda: probe.zombies == 1, limit=5, what="the zombie found")
        assert [link for link, _ in connector.lost] == [suspected]
        assert "refuses" in connector.lost[0][1]


async def test_a_suspected_link_that_takes_the_probe_is_kept() -> None:
    connector, publisher = Connector(), Publisher(refuses=False)
    async with _probe(connector, publisher) as probe:
        probe.suspect(connector.link)
        await eventually(lambda: publisher.sent == 1, limit=5, what="the probe sent")
        await asyncio.sleep(0.1)
        assert (probe.zombies, connector.lost) == (0, [])


async def test_a_link_already_replaced_is_not_probed() -> None:
    connector, publisher = Connector(), Publisher(refuses=True)
    async with _probe(connector, publisher) as probe:
        probe.suspect(Link())  # not the connector's link any more
        await asyncio.sleep(0.2)
        assert (publisher.sent, probe.zombies) == (0, 0)


async def test_the_probe_sent_again_after_a_late_one_is_watched_by_the_silence_watchdog() -> None:
    connector, node = Connector(Link(unsettled=0)), SilentNode()
    async with _probe(connector, node, quiet=0.05, probe_timeout=0.05):
        await eventually(lambda: bool(connector.lost), limit=10, what="the zombie found")
    assert node.watched[:2] == [False, True]
    assert "a zombie" in connector.lost[0][1]

"""A zombie probe that is late is sent again, and the link's silence watchdog waits for the second
one's confirm: a node cut off sends nothing at all (no heartbeat either), so its link is dropped once
it has been silent for ``dead_after_busy``, without waiting out the second probe's longer deadline."""

from __future__ import annotations

import asyncio
from typing import Any

from gear.errors import OutcomeUnknownError
from gear.session.probe import LinkProbe
from tests.fleet import eventually


class Link:
    is_open = True
    unsettled = 0


class Connector:
    def __init__(self) -> None:
        self.link: Link | None = Link()
        self.ready = asyncio.Event()
        self.ready.set()
        self.blocked_reason: str | None = None
        self.setup_took = 0.01
        self.lost: list[str] = []

    def lose(self, link: Link, why: str) -> None:
        self.lost.append(why)
        self.link = Link()


class SilentNode:
    """A publisher whose node never confirms: each probe ends as sent, outcome unknown."""

    def __init__(self) -> None:
        self.watched: list[bool] = []

    async def publish(self, msg: Any, until: Any, **_: Any) -> bool:
        self.watched.append(msg.watched)
        raise OutcomeUnknownError(msg.address, "no confirm from the broker before the deadline")


async def test_the_probe_sent_again_after_a_late_one_is_watched_by_the_silence_watchdog() -> None:
    connector, node = Connector(), SilentNode()
    probe = LinkProbe(
        connector,  # type: ignore[arg-type]
        node,  # type: ignore[arg-type]
        "SRV.s1",
        quiet=0.05,
        timeout=0.05,
        longest_quiet=0.05,
    )
    probe.start()
    try:
        await eventually(lambda: bool(connector.lost), limit=10, what="the zombie found")
    finally:
        await probe.stop()
    assert node.watched[:2] == [False, True]
    assert "a zombie" in connector.lost[0]

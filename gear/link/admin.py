"""Operations on a broker outside any service's link: one short connection each.

``delete_queues`` leaves nothing behind on a shared broker: a Gear service's shared ``TYPE`` queue
never expires (its instances come and go; the queue stays), so code that invents service types for a
run deletes their queues when it is done::

    await delete_queues(url, [q.name for q in svc.topology.queues])
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from pamqp import commands

from gear.amqp import ClosedError
from gear.errors import GearError
from gear.link.connection import connect

__all__ = ("delete_queues",)

_WAIT = 5.0


async def delete_queues(url: str, names: Iterable[str]) -> None:
    """Delete the queues ``names`` on the broker at ``url``, best effort: a queue already gone, or a
    broker that went away, is not an error at the end of a run."""
    try:
        conn = await connect(url, heartbeat=0, name="gear cleanup", handshake_timeout=_WAIT)
    except (GearError, OSError):
        return
    try:
        for name in names:
            with contextlib.suppress(ClosedError, TimeoutError):
                channel = await conn.channel()
                await channel.call(commands.Queue.Delete(queue=name))
                await channel.close(_WAIT)
    finally:
        await conn.close(_WAIT)

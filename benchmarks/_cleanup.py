"""Leave nothing behind on a shared broker: a Gear service's shared ``TYPE`` queue never expires, so a
benchmark that makes up service types deletes their queues when it is done with them."""

from __future__ import annotations

from collections.abc import Iterable

import aiormq

__all__ = ("delete_queues", "service_queues")


def service_queues(*services: object) -> list[str]:
    """The queue names of Gear services (``gear.Service``), from their topology."""
    return [q.name for svc in services for q in svc.topology.queues]  # type: ignore[attr-defined]


async def delete_queues(url: str, names: Iterable[str]) -> None:
    """Delete the queues ``names`` on the broker at ``url``, best effort: a queue already gone (or a
    broker that went away) is not an error at the end of a benchmark."""
    try:
        conn = await aiormq.connect(url)
    except (OSError, aiormq.exceptions.AMQPError):
        return
    try:
        for name in names:
            try:
                channel = await conn.channel()
                await channel.queue_delete(name)
                await channel.close()
            except aiormq.exceptions.AMQPError:
                continue
    finally:
        await conn.close()

"""Operations on a broker outside any service's link: one short connection each.

``delete_queues`` leaves nothing behind on a shared broker: a Gear service's shared ``TYPE`` queue
never expires (its instances come and go; the queue stays), so code that invents service types for a
run deletes their queues when it is done::

    await delete_queues(url, [q.name for q in svc.topology.queues])
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from gear.amqp import ChannelClosedError, ClosedError
from gear.errors import GearError
from gear.link.connection import connect
from gear.wire import spec

__all__ = ("delete_queues", "delete_unused")

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
                await channel.call(spec.Queue.Delete(queue=name))
                await channel.close(_WAIT)
    finally:
        await conn.close(_WAIT)


async def delete_unused(url: str, targets: Iterable[tuple[str, str]], *, if_empty: bool = True) -> list[str]:
    """Delete each ``(kind, name)`` target (``queue`` or ``exchange``) on the broker at ``url``, only
    while it is unused (``if-unused``: a queue without consumers, an exchange without bindings) and,
    with ``if_empty``, a queue only while it holds no message: the broker checks, at the moment of the
    delete. Returns, for each target in order, ``""`` if it went, else why it stayed.

    Raises:
        ConnectError: the broker cannot be reached.
    """
    conn = await connect(url, heartbeat=0, name="gear prune", handshake_timeout=_WAIT)
    todo = list(targets)
    outcomes: list[str] = []
    try:
        for kind, name in todo:
            method: spec.Queue.Delete | spec.Exchange.Delete = (
                spec.Queue.Delete(queue=name, if_unused=True, if_empty=if_empty)
                if kind == "queue"
                else spec.Exchange.Delete(exchange=name, if_unused=True)
            )
            try:
                channel = await conn.channel()
                await channel.call(method)
            except ChannelClosedError as exc:
                outcomes.append(f"the broker refused: {exc.code} {exc.text}")
                continue
            except ClosedError as exc:
                lost = f"not tried: the connection was lost ({exc})"
                outcomes += [lost] * (len(todo) - len(outcomes))
                break
            with contextlib.suppress(ClosedError, TimeoutError):
                await channel.close(_WAIT)
            outcomes.append("")
    finally:
        await conn.close(_WAIT)
    return outcomes

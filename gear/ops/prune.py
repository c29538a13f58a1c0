"""Retired service types: the durable ``TYPE`` queues no instance serves any more, and exchanges bound to
nothing, found and (on request) removed. ``gear prune`` is the command.

A ``TYPE.HOST`` queue goes away by itself soon after its instance (``x-expires``), but the shared
``TYPE`` queue is durable and never expires: on a shared broker every type that was tried once (a
test, a demo, a renamed service) stays, with whatever requests it still holds. A queue is *retired*
here when it is durable, not exclusive, named like a TYPE (no dot), bound from Gear's exchange with its
own name as the key, and has no consumer. An exchange is *unused* when no binding leads from it or to
it (RabbitMQ's own ``amq.*`` and the default exchange aside).

Finding reads the broker's management API (RabbitMQ's plugin, or the reference broker's
``--management-port``); removing speaks AMQP, with ``if-unused`` always (a queue that got a consumer
meanwhile is served again: kept) and ``if-empty`` unless messages may go too, so that the broker itself
refuses what changed between the listing and the removal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gear.base.address import validate_type
from gear.link.admin import delete_unused
from gear.ops.management import Management

__all__ = ("Removal", "Retired", "find_retired", "remove_retired")


@dataclass(frozen=True, slots=True)
class Retired:
    """A queue no instance serves, or an exchange bound to nothing."""

    kind: str
    """``queue`` or ``exchange``."""
    name: str
    messages: int = 0
    """Messages the queue holds (0 for an exchange)."""

    @property
    def holds_messages(self) -> bool:
        """True for a queue with messages: removed only when messages may go too."""
        return self.messages > 0


@dataclass(frozen=True, slots=True)
class Removal:
    """What became of one :class:`Retired` item: removed, or kept and why."""

    item: Retired
    removed: bool
    reason: str = ""


def find_retired(api: Management, exchange: str = "gear") -> list[Retired]:
    """The retired ``TYPE`` queues and the unused exchanges of the vhost ``api`` logs into, queues
    first, each sorted by name.

    Raises:
        ManagementUnavailableError: the management API did not answer.
    """
    queues: list[dict[str, Any]] = api.get("queues", api.vhost)
    exchanges: list[dict[str, Any]] = api.get("exchanges", api.vhost)
    bindings: list[dict[str, Any]] = api.get("bindings", api.vhost)
    own_key = {
        b["destination"]
        for b in bindings
        if b.get("source") == exchange
        and b.get("destination_type") == "queue"
        and b.get("routing_key") == b.get("destination")
    }
    found = [
        Retired("queue", q["name"], int(q.get("messages") or 0))
        for q in queues
        if q["name"] in own_key
        and q.get("durable")
        and not q.get("exclusive")
        and not q.get("consumers")
        and _is_type(q["name"])
    ]
    bound = {b.get("source") for b in bindings} | {
        b.get("destination") for b in bindings if b.get("destination_type") == "exchange"
    }
    found += [
        Retired("exchange", e["name"])
        for e in exchanges
        if e["name"] and not e["name"].startswith("amq.") and e["name"] not in bound
    ]
    return sorted(found, key=lambda r: (r.kind != "queue", r.name))


def _is_type(name: str) -> bool:
    try:
        validate_type(name)
    except ValueError:
        return False
    return True


async def remove_retired(url: str, items: Iterable[Retired], *, with_messages: bool = False) -> list[Removal]:
    """Delete ``items`` on the broker at ``url``: a queue only while it has no consumer, and, unless
    ``with_messages``, no message; an exchange only while nothing is bound to or from it. Each item the
    broker refuses is kept, with its reason.

    Raises:
        ConnectError: the broker cannot be reached.
    """
    items = list(items)
    tried = [i for i in items if with_messages or not i.holds_messages]
    outcomes = await delete_unused(url, [(i.kind, i.name) for i in tried], if_empty=not with_messages)
    reasons = dict(zip(map(id, tried), outcomes, strict=True))
    return [
        Removal(i, not reasons[id(i)], reasons[id(i)])
        if id(i) in reasons
        else Removal(i, False, f"holds {i.messages} message(s)")
        for i in items
    ]

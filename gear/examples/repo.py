"""REPO: a stateful service. Each instance holds the keys that hash to it.

Because the data lives in one particular instance, callers address ``REPO.<host>`` (point-to-point) and
never the round-robin ``REPO`` queue: a ``get`` that reached another instance would find nothing. Which
host holds a key is decided by the callers with the same consistent-hash ring (see
``gear.examples.hashring``).

Run one instance::

    GEAR_HOST=repo1 gear serve gear.examples.repo:create_service
"""

from __future__ import annotations

from dataclasses import dataclass, field

import gear
from gear.examples.models import InstanceStatus, Item, ItemFound, ItemQuery, Refresh, StatusQuery, Stored
from gear.tracing.api import Tracer

__all__ = ("DEFAULT_TYPE", "RepoState", "create_service")

DEFAULT_TYPE = "REPO"


@dataclass
class RepoState:
    """One instance's data: ``key -> (value, version)``, plus counters the demo prints."""

    host: str
    items: dict[str, tuple[str, int]] = field(default_factory=dict)
    refreshes: int = 0
    handled: int = 0


def create_service(
    host: str | None = None,
    url: str | list[str] | None = None,
    *,
    type_: str | None = None,
    settings: gear.Settings | None = None,
    tracer: Tracer | None = None,
) -> gear.Service:
    """Build one REPO instance; unset arguments come from ``GEAR_HOST``, ``GEAR_URL``, ``GEAR_TYPE``."""
    settings = settings or gear.Settings()
    svc = gear.Service(
        type_ or settings.type or DEFAULT_TYPE, host=host, url=url, settings=settings, tracer=tracer
    )
    state = RepoState(host=svc.host)

    @svc.handler("put")
    async def put(item: Item) -> Stored:
        # The payload was validated against ``Item`` before we got here.
        _, version = state.items.get(item.key, ("", 0))
        state.items[item.key] = (item.value, version + 1)
        state.handled += 1
        return Stored(host=state.host, key=item.key, version=version + 1)

    @svc.handler("get")
    async def get(query: ItemQuery) -> ItemFound:
        state.handled += 1
        value, _ = state.items.get(query.key, (None, 0))
        return ItemFound(key=query.key, value=value, repo_host=state.host)

    # A plain ``def`` works too: Gear runs it in a thread pool so it never blocks heartbeats.
    @svc.handler("status")
    def status(query: StatusQuery) -> InstanceStatus:
        return InstanceStatus(
            type=svc.type,
            host=state.host,
            refreshes=state.refreshes,
            items=len(state.items),
            keys=sorted(state.items) if query.verbose else [],
            handled=state.handled,
        )

    # Broadcast ``*.*``: every instance of every type gets it, once. Usually sent with cast.
    @svc.handler("refresh")
    async def refresh(notice: Refresh) -> InstanceStatus:
        state.refreshes += 1
        return status(StatusQuery())

    return svc

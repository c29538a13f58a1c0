"""REPO: a stateful service. Each instance holds the keys that hash to it.

Because the data lives in one particular instance, callers address ``REPO.<host>`` (point-to-point) and
never the round-robin ``REPO`` queue: a ``get`` that reached another instance would find nothing. Which
host holds a key is decided by the callers with the same consistent-hash ring (see
``gear.examples.hashring``). What REPO answers is the ``Repo`` contract (``gear.examples.contracts``);
:class:`RepoHandlers` implements it.

Run one instance::

    GEAR_HOST=repo1 gear serve gear.examples.repo:create_service
"""

from __future__ import annotations

from dataclasses import dataclass, field

import gear
from gear.examples.contracts import Repo
from gear.examples.models import InstanceStatus, Item, ItemFound, ItemQuery, Refresh, StatusQuery, Stored
from gear.tracing.api import Tracer

__all__ = ("DEFAULT_TYPE", "RepoHandlers", "RepoState", "create_service")

DEFAULT_TYPE = "REPO"


@dataclass
class RepoState:
    """One instance's data: ``key -> (value, version)``, plus counters the demo prints."""

    host: str
    items: dict[str, tuple[str, int]] = field(default_factory=dict)
    refreshes: int = 0
    handled: int = 0


class RepoHandlers(Repo):
    """REPO's side of the :class:`~gear.examples.contracts.Repo` contract. It subclasses the contract,
    so mypy checks every signature against it; ``svc.implement`` checks them again before start."""

    def __init__(self, svc: gear.Service) -> None:
        self.svc = svc
        self.state = RepoState(host=svc.host)

    async def put(self, item: Item) -> Stored:
        # The payload was validated against ``Item`` before we got here.
        state = self.state
        _, version = state.items.get(item.key, ("", 0))
        state.items[item.key] = (item.value, version + 1)
        state.handled += 1
        return Stored(host=state.host, key=item.key, version=version + 1)

    async def get(self, query: ItemQuery) -> ItemFound:
        self.state.handled += 1
        value, _ = self.state.items.get(query.key, (None, 0))
        return ItemFound(key=query.key, value=value, repo_host=self.state.host)

    async def status(self, query: StatusQuery) -> InstanceStatus:
        state = self.state
        return InstanceStatus(
            type=self.svc.type,
            host=state.host,
            refreshes=state.refreshes,
            items=len(state.items),
            keys=sorted(state.items) if query.verbose else [],
            handled=state.handled,
        )

    # Broadcast ``*.*``: every instance of every type gets it, once. One-way: sent with a cast.
    async def refresh(self, notice: Refresh) -> None:
        self.state.refreshes += 1


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
    svc.implement(Repo, RepoHandlers(svc))
    return svc

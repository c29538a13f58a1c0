"""CTRL: a stateless service that answers by asking REPO itself.

Any CTRL instance can serve any request, so callers address plain ``CTRL`` and the broker hands each
request to one instance, round-robin. ``lookup`` is the awkward case: CTRL cannot answer alone and
must ask the REPO instance that holds the key. Here that is just an ``await`` on a typed proxy of the
``Repo`` contract inside the handler: the nested call inherits what is left of the caller's deadline, so
a slow REPO makes the whole chain fail in time instead of leaving the caller waiting after CTRL gave up.

``export`` is the same case for code that blocks (a report library, a database driver without asyncio):
a plain ``def`` handler runs in a worker thread and makes its nested calls through ``gear.call_sync``
and ``gear.gather_sync``, the blocking twins of awaiting a proxy, with the same deadline inheritance
and errors. Between calls it checks ``gear.cancelled()``: once the caller's deadline has passed
nobody reads the answer, so it stops early.

Every CTRL instance also listens for the multicast ``CTRL.*`` ``reload`` (a new configuration, here the
REPO hash ring) and the broadcast ``*.*`` ``refresh``: one-way methods of the ``Ctrl`` contract.

Run one instance::

    GEAR_HOST=ctrl1 REPO_HOSTS=repo1,repo2,repo3 gear serve gear.examples.ctrl:create_service
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import gear
from gear.examples import repo
from gear.examples.contracts import Ctrl, Repo
from gear.examples.hashring import HashRing
from gear.examples.models import (
    ExportQuery,
    ExportReport,
    InstanceStatus,
    ItemFound,
    ItemQuery,
    Refresh,
    ReloadConfig,
    StatusQuery,
)
from gear.tracing.api import Tracer

__all__ = ("DEFAULT_TYPE", "CtrlHandlers", "CtrlState", "create_service", "repo_hosts_from_env")

DEFAULT_TYPE = "CTRL"


def repo_hosts_from_env() -> list[str]:
    """The REPO ring from ``REPO_HOSTS`` (``repo1,repo2,repo3``); empty if unset."""
    return [h.strip() for h in os.environ.get("REPO_HOSTS", "").split(",") if h.strip()]


@dataclass
class CtrlState:
    """What one CTRL instance knows: its configuration and a few counters."""

    ring: HashRing
    config_version: int = 0
    refreshes: int = 0
    handled: int = 0
    reloads: list[int] = field(default_factory=list)


class CtrlHandlers:
    """CTRL's side of the :class:`~gear.examples.contracts.Ctrl` contract.

    ``export`` and ``status`` are plain ``def`` methods (run in worker threads), so this class does not
    subclass the contract (mypy would see a ``def`` where the contract has an ``async def``);
    ``svc.implement`` checks each signature against the contract before the service starts.
    """

    def __init__(self, svc: gear.Service, state: CtrlState, repo_type: str) -> None:
        self.svc = svc
        self.state = state
        self._repo_type = repo_type
        self._repos: dict[str, Repo] = {}
        self._every_repo = svc.proxy(Repo, f"{repo_type}.*")

    def repo(self, host: str) -> Repo:
        """The proxy of REPO instance ``host`` (made once)."""
        found = self._repos.get(host)
        if found is None:
            found = self._repos.setdefault(host, self.svc.proxy(Repo, f"{self._repo_type}.{host}"))
        return found

    def owner(self, key: str) -> str:
        """The REPO host that holds ``key``.

        Raises:
            LookupError: this instance knows no REPO host (started without ``REPO_HOSTS``).
        """
        if not self.state.ring.hosts:
            raise LookupError(
                f"{self.svc.address} knows no {self._repo_type} hosts: start it with "
                "REPO_HOSTS=repo1,repo2,repo3, or send every CTRL the ring: gear send multicast "
                f"""{self.svc.type} reload -d '{{"version":1,"repo_hosts":["repo1","repo2","repo3"]}}'"""
            )
        return self.state.ring.host_for(key)

    async def lookup(self, query: ItemQuery) -> ItemFound:
        self.state.handled += 1
        owner = self.owner(query.key)
        budget = gear.remaining_budget()
        # No timeout here on purpose: the nested call's deadline is the one this request arrived with.
        found = await self.repo(owner).get(query)
        return found.model_copy(
            update={"ctrl_host": self.svc.host, "budget_ms": None if budget is None else round(budget * 1000)}
        )

    def export(self, query: ExportQuery) -> ExportReport:
        # A plain def: it runs in a worker thread and may block. It cannot await, so gear.call_sync
        # makes the same nested calls from this thread, inheriting this request's deadline.
        state = self.state
        state.handled += 1
        values: dict[str, str | None] = {}
        for key in query.keys:
            if gear.cancelled():  # the caller's deadline passed: nobody waits for the rest
                break
            found = gear.call_sync(self.repo(self.owner(key)).get, ItemQuery(key=key))
            values[found.key] = found.value
        census = gear.gather_sync(self._every_repo.status, StatusQuery(), expected=len(state.ring.hosts))
        held = sum(answer.result.items for answer in census if answer.result is not None)
        return ExportReport(
            ctrl_host=self.svc.host,
            thread=threading.current_thread().name,
            values=values,
            repo_items=held,
            complete=len(values) == len(set(query.keys)),
        )

    async def reload(self, config: ReloadConfig) -> None:
        state = self.state
        state.config_version = config.version
        state.reloads.append(config.version)
        if config.repo_hosts:
            state.ring = HashRing(config.repo_hosts)

    def status(self, query: StatusQuery) -> InstanceStatus:
        state = self.state
        return InstanceStatus(
            type=self.svc.type,
            host=self.svc.host,
            config_version=state.config_version,
            refreshes=state.refreshes,
            keys=list(state.ring.hosts) if query.verbose else [],
            handled=state.handled,
        )

    async def refresh(self, notice: Refresh) -> None:
        self.state.refreshes += 1


def create_service(
    host: str | None = None,
    url: str | list[str] | None = None,
    *,
    repo_hosts: Sequence[str] | None = None,
    type_: str | None = None,
    repo_type: str = repo.DEFAULT_TYPE,
    settings: gear.Settings | None = None,
    tracer: Tracer | None = None,
) -> gear.Service:
    """Build one CTRL instance; ``repo_hosts`` defaults to ``REPO_HOSTS`` from the environment."""
    settings = settings or gear.Settings()
    svc = gear.Service(
        type_ or settings.type or DEFAULT_TYPE, host=host, url=url, settings=settings, tracer=tracer
    )
    state = CtrlState(ring=HashRing(repo_hosts if repo_hosts is not None else repo_hosts_from_env()))
    svc.implement(Ctrl, CtrlHandlers(svc, state, repo_type))
    return svc

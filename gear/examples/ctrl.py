"""CTRL: a stateless service that answers by asking REPO itself.

Any CTRL instance can serve any request, so callers address plain ``CTRL`` and the broker hands each
request to one instance, round-robin. ``lookup`` is the seed's awkward case: CTRL cannot answer alone and
must ask the REPO instance that holds the key. Here that is just an ``await`` inside the handler: the
nested call inherits what is left of the caller's deadline, so a slow REPO makes the whole chain fail in
time instead of leaving the caller waiting after CTRL gave up.

``export`` is the same case for code that blocks (a report library, a database driver without asyncio):
a plain ``def`` handler runs in a worker thread and makes its nested calls through ``svc.rpc.sync``,
the blocking twin of ``svc.rpc`` with the same deadline inheritance and errors. Between calls it checks
``gear.cancelled()``: once the caller's deadline has passed nobody reads the answer, so it stops early.

Every CTRL instance also listens for the multicast ``CTRL.*`` ``reload`` (a new configuration, here the
REPO hash ring) and the broadcast ``*.*`` ``refresh``.

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

__all__ = ("DEFAULT_TYPE", "CtrlState", "create_service", "repo_hosts_from_env")

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

    @svc.handler("lookup")
    async def lookup(query: ItemQuery) -> ItemFound:
        state.handled += 1
        owner = state.ring.host_for(query.key)
        budget = gear.remaining_budget()
        # No timeout here on purpose: the nested call's deadline is the one this request arrived with.
        # The payload can be the model itself; call_as validates the JSON reply back into a model.
        found = await svc.rpc.call_as(ItemFound, f"{repo_type}.{owner}", "get", query)
        return found.model_copy(
            update={"ctrl_host": svc.host, "budget_ms": None if budget is None else round(budget * 1000)}
        )

    @svc.handler("export")
    def export(query: ExportQuery) -> ExportReport:
        # A plain def: it runs in a worker thread and may block. It cannot await, so svc.rpc.sync
        # makes the same nested calls from this thread, inheriting this request's deadline.
        state.handled += 1
        values: dict[str, str | None] = {}
        for key in query.keys:
            if gear.cancelled():  # the caller's deadline passed: nobody waits for the rest
                break
            owner = state.ring.host_for(key)
            found = svc.rpc.sync.call_as(ItemFound, f"{repo_type}.{owner}", "get", ItemQuery(key=key))
            values[found.key] = found.value
        census = svc.rpc.sync.gather(
            f"{repo_type}.*", "status", StatusQuery(), expected=len(state.ring.hosts)
        )
        held = sum(InstanceStatus.model_validate(reply.result).items for reply in census if reply.ok)
        return ExportReport(
            ctrl_host=svc.host,
            thread=threading.current_thread().name,
            values=values,
            repo_items=held,
            complete=len(values) == len(set(query.keys)),
        )

    @svc.handler("reload")
    async def reload(config: ReloadConfig) -> InstanceStatus:
        state.config_version = config.version
        state.reloads.append(config.version)
        if config.repo_hosts:
            state.ring = HashRing(config.repo_hosts)
        return status(StatusQuery())

    @svc.handler("status")
    def status(query: StatusQuery) -> InstanceStatus:
        return InstanceStatus(
            type=svc.type,
            host=svc.host,
            config_version=state.config_version,
            refreshes=state.refreshes,
            keys=list(state.ring.hosts) if query.verbose else [],
            handled=state.handled,
        )

    @svc.handler("refresh")
    async def refresh(notice: Refresh) -> InstanceStatus:
        state.refreshes += 1
        return status(StatusQuery())

    return svc

"""The example system's contracts: what WEB, CTRL and REPO may ask of each other, declared once.

Both sides import this module and nothing else of the other: REPO and CTRL implement these contracts
(``svc.implement``, checked before the service starts), and their callers hold typed proxies
(``svc.proxy(Repo, "REPO.repo2")``) whose calls ``mypy --strict`` checks. ``gear contract export
gear.examples.contracts:Repo`` writes REPO's AsyncAPI document.
"""

from __future__ import annotations

from typing import Protocol

import gear
from gear.examples.models import (
    ExportQuery,
    ExportReport,
    InstanceStatus,
    Item,
    ItemFound,
    ItemQuery,
    Refresh,
    ReloadConfig,
    StatusQuery,
    Stored,
)

__all__ = ("Ctrl", "Instance", "Repo")


class Instance(gear.Contract, Protocol):
    """What every instance of the example system answers, whatever its TYPE (``*.*`` reaches them all)."""

    async def status(self, query: StatusQuery) -> InstanceStatus:
        """Who the instance is, what it has done and holds."""
        ...

    @gear.one_way
    async def refresh(self, notice: Refresh) -> None:
        """Drop caches; sent to every instance with a broadcast cast."""
        ...


class Repo(Instance, Protocol, type="REPO"):
    """REPO: stateful; each instance holds the keys that hash to it, so callers address REPO.<host>."""

    async def put(self, item: Item) -> Stored:
        """Store a value under a key on this instance."""
        ...

    async def get(self, query: ItemQuery) -> ItemFound:
        """The value this instance holds under a key (None when it holds none)."""
        ...


class Ctrl(Instance, Protocol, type="CTRL"):
    """CTRL: stateless; any instance answers (callers address CTRL), asking the owning REPO itself."""

    async def lookup(self, query: ItemQuery) -> ItemFound:
        """A key's value, from the REPO instance that holds it (a nested call within the deadline)."""
        ...

    async def export(self, query: ExportQuery) -> ExportReport:
        """A report on several keys, made by a blocking handler in a worker thread."""
        ...

    @gear.one_way
    async def reload(self, config: ReloadConfig) -> None:
        """Apply a new configuration (the REPO ring); sent to every CTRL with a multicast cast."""
        ...

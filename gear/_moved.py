"""Old module paths, kept importable for one release after the re-layout (issue 38).

``gear.rpc`` now lives at ``gear.calling.rpc``, ``gear.broker.channel`` at
``gear.broker.protocol.channel`` and so on (:data:`MOVED`). ``gear/__init__.py`` installs
:class:`MovedFinder` on ``sys.meta_path``: importing an old path imports the new module, warns with a
``DeprecationWarning`` naming the new path, and gives back that same module object (so
``gear.rpc.RPC is gear.calling.rpc.RPC``). Names not in the map are left to the other finders.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the import system needs only the methods; importlib.abc costs ~9 ms at run time
    from importlib.abc import Loader as _Loader
else:
    _Loader = object

__all__ = ["MOVED", "MovedFinder", "install"]

MOVED: dict[str, str] = {
    "gear.address": "gear.base.address",
    "gear.attempts": "gear.session.attempts",
    "gear.broker.access": "gear.broker.node.access",
    "gear.broker.alarms": "gear.broker.node.alarms",
    "gear.broker.arguments": "gear.broker.model.arguments",
    "gear.broker.channel": "gear.broker.protocol.channel",
    "gear.broker.checks": "gear.broker.model.checks",
    "gear.broker.config": "gear.broker.node.config",
    "gear.broker.connection": "gear.broker.protocol.connection",
    "gear.broker.consume": "gear.broker.operations.consume",
    "gear.broker.consumers": "gear.broker.model.consumers",
    "gear.broker.core": "gear.broker.node.core",
    "gear.broker.credit": "gear.broker.model.credit",
    "gear.broker.declare": "gear.broker.operations.declare",
    "gear.broker.definitions": "gear.broker.node.definitions",
    "gear.broker.delivery_timeout": "gear.broker.operations.delivery_timeout",
    "gear.broker.exchange": "gear.broker.model.exchange",
    "gear.broker.expiry": "gear.broker.model.expiry",
    "gear.broker.handshake": "gear.broker.protocol.handshake",
    "gear.broker.management": "gear.broker.shell.management",
    "gear.broker.message": "gear.broker.model.message",
    "gear.broker.metrics": "gear.broker.shell.metrics",
    "gear.broker.persist": "gear.broker.node.persist",
    "gear.broker.queue": "gear.broker.model.queue",
    "gear.broker.replies": "gear.broker.model.replies",
    "gear.broker.server": "gear.broker.shell.server",
    "gear.broker.status": "gear.broker.node.status",
    "gear.broker.tls": "gear.broker.shell.tls",
    "gear.broker.topic": "gear.broker.model.topic",
    "gear.broker.totals": "gear.broker.model.totals",
    "gear.broker.vhost": "gear.broker.model.vhost",
    "gear.cadence": "gear.session.cadence",
    "gear.context": "gear.base.context",
    "gear.deadletter": "gear.serving.deadletter",
    "gear.deadline": "gear.base.deadline",
    "gear.dispatch": "gear.serving.dispatch",
    "gear.duplicates": "gear.serving.duplicates",
    "gear.envelope": "gear.base.envelope",
    "gear.handler": "gear.serving.handler",
    "gear.hedge": "gear.session.hedge",
    "gear.hooks": "gear.session.hooks",
    "gear.inbound": "gear.serving.inbound",
    "gear.limits": "gear.base.limits",
    "gear.management": "gear.ops.management",
    "gear.pacing": "gear.session.pacing",
    "gear.probe": "gear.session.probe",
    "gear.prune": "gear.ops.prune",
    "gear.publisher": "gear.session.publisher",
    "gear.reconnect": "gear.session.reconnect",
    "gear.records": "gear.base.records",
    "gear.redact": "gear.base.redact",
    "gear.reply": "gear.base.reply",
    "gear.rpc": "gear.calling.rpc",
    "gear.sync": "gear.calling.sync",
    "gear.timers": "gear.base.timers",
    "gear.tls": "gear.session.tls",
    "gear.topology": "gear.base.topology",
}
"""Old module path -> where the module lives now."""


class _AliasLoader(_Loader):
    """Loads an old path as the new module: the import system's module for the old name is replaced in
    ``sys.modules`` by the new one (which keeps its own ``__spec__``)."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return None  # a throwaway module; exec_module swaps the real one in

    def exec_module(self, module: ModuleType) -> None:
        old = module.__name__
        warnings.warn(
            f"{old} moved to {self.new}; the old path goes away in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        sys.modules[old] = importlib.import_module(self.new)


class MovedFinder:
    """Finds the old paths of :data:`MOVED` (and only those)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return ModuleSpec(fullname, _AliasLoader(new))


def install() -> None:
    """Put one :class:`MovedFinder` on ``sys.meta_path`` (again a no-op)."""
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedFinder())

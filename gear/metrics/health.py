"""What an orchestrator asks of an instance: is it alive, is it ready, and what the exporters read.

* **alive** (``/livez``): the event loop runs a no-op within :data:`LIVENESS_TIMEOUT`;
* **ready** (``/readyz``): a link is open, the topology is declared, every consumer the instance needs
  is attached, and it is neither draining nor asked to stop (SIGTERM makes it unready at once, before
  the drain begins).

:class:`Probe` is what a service offers the exporters (:class:`gear.Service` is one); everything on
it is read on the event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ("LINK_STATES", "LIVENESS_TIMEOUT", "Probe", "Readiness")

LIVENESS_TIMEOUT = 2.0
"""Seconds the event loop has to answer ``/livez``."""

LINK_STATES = ("connecting", "ready", "blocked", "reconnecting", "stopped")
"""Every value of :attr:`gear.Service.state` (a ``gear.ServiceState``)."""


@dataclass(frozen=True, slots=True)
class Readiness:
    """Whether the instance takes work, and if not, why."""

    ready: bool
    reasons: tuple[str, ...] = field(default=())
    """What is missing: ``link down``, ``consumer of 'Q' not attached``, ``draining``..."""


class Probe(Protocol):
    """A running service as the exporters see it."""

    @property
    def type(self) -> str:
        """Its TYPE."""
        ...

    @property
    def stats(self) -> Mapping[str, int]:
        """Its counters (``returns``, ``reconnects``, ``calls_in_flight``...)."""
        ...

    @property
    def state(self) -> str:
        """One of :data:`LINK_STATES`."""
        ...

    def readiness(self) -> Readiness:
        """Whether it is ready, and why not."""
        ...

    def health(self) -> dict[str, Any]:
        """Its JSON-able health summary."""
        ...

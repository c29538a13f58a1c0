"""Plain snapshots of broker state, like the management UI's overview (flow and blocked states)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ("BrokerStatus", "ConnectionStatus", "QueueStatus")


@dataclass(frozen=True, slots=True)
class ConnectionStatus:
    """One client connection. ``state`` is ``running``, ``flow``, ``blocking`` or ``blocked``."""

    name: str
    peer: str
    state: str
    channels: int
    user: str = ""
    vhost: str = ""


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """One queue. ``state`` is ``running``, or ``flow`` while a publisher waits for its credit."""

    name: str
    vhost: str
    messages_ready: int
    messages_unacked: int
    consumers: int
    state: str
    durable: bool = False
    exclusive: bool = False
    auto_delete: bool = False


@dataclass(frozen=True, slots=True)
class BrokerStatus:
    """The whole broker at one moment."""

    connections: list[ConnectionStatus] = field(default_factory=list)
    queues: list[QueueStatus] = field(default_factory=list)
    alarms: list[str] = field(default_factory=list)
    memory_used: int = 0
    memory_limit: int = 0

"""Plain snapshots of broker state, like the management UI's overview (flow and blocked states)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ("BrokerStatus", "ConnectionStatus", "QueueStatus", "StoreStatus", "format_status")


@dataclass(frozen=True, slots=True)
class ConnectionStatus:
    """One client connection. ``state`` is ``running``, ``flow``, ``blocking`` or ``blocked``."""

    name: str
    peer: str
    state: str
    channels: int
    user: str = ""
    vhost: str = ""
    tls: bool = False


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
    messages_paged: int = 0
    """Ready messages whose bodies are on disk only (paged out, lazy, or recovered)."""


@dataclass(frozen=True, slots=True)
class StoreStatus:
    """The data directory's message store."""

    directory: str
    bytes: int
    """Segment files and queue journal."""
    garbage_ratio: float
    """Share of segment bytes no longer referenced (compaction reclaims it)."""
    messages: int
    """Distinct messages stored and still referenced."""
    paged: int
    """Ready messages whose bodies are on disk only."""
    paging: bool
    """Memory is above the paging limit: new message bodies go to disk."""


@dataclass(frozen=True, slots=True)
class BrokerStatus:
    """The whole broker at one moment."""

    connections: list[ConnectionStatus] = field(default_factory=list)
    queues: list[QueueStatus] = field(default_factory=list)
    alarms: list[str] = field(default_factory=list)
    memory_used: int = 0
    memory_limit: int = 0
    disk_free: int | None = None
    """Free bytes on the broker's disk at the last check (None: not measured, no disk_free_limit)."""
    disk_free_limit: int | None = None
    """Below this many free bytes the disk alarm blocks publishers (None: no disk alarm)."""
    failed_logins: int = 0
    """Logins refused since the broker started (wrong password, unknown user, bad mechanism...)."""
    store: StoreStatus | None = None
    """The data directory, or None when everything is in memory."""

    def __str__(self) -> str:
        return format_status(self)


def format_status(status: BrokerStatus) -> str:
    """A plain-text overview, like the management UI's connections and queues tabs."""
    lines = [
        f"memory: {status.memory_used:,} of {status.memory_limit:,} bytes"
        f"{'  ALARM: ' + ', '.join(status.alarms) if status.alarms else ''}",
        *(
            [f"disk: {status.disk_free:,} bytes free, limit {status.disk_free_limit:,}"]
            if status.disk_free is not None and status.disk_free_limit is not None
            else []
        ),
        f"failed logins: {status.failed_logins}",
        _store_line(status.store),
        "",
        f"{'connection':<40} {'state':<9} {'channels':>8}",
    ]
    lines += [f"{c.name[:40]:<40} {c.state:<9} {c.channels:>8}" for c in status.connections]
    lines += [
        "",
        f"{'queue':<40} {'vhost':<6} {'ready':>8} {'unacked':>8} {'paged':>8} {'consumers':>9} {'state':<8}",
    ]
    lines += [
        f"{q.name[:40]:<40} {q.vhost[:6]:<6} {q.messages_ready:>8} {q.messages_unacked:>8} "
        f"{q.messages_paged:>8} {q.consumers:>9} {q.state:<8}"
        for q in status.queues
    ]
    return "\n".join(lines)


def _store_line(store: StoreStatus | None) -> str:
    if store is None:
        return "store: none (memory only)"
    return (
        f"store: {store.directory}: {store.bytes:,} bytes, {store.garbage_ratio:.0%} garbage, "
        f"{store.messages:,} messages, {store.paged:,} paged{' (paging)' if store.paging else ''}"
    )

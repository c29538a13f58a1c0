"""Broker configuration: one frozen dataclass, shared by the API, ``serve`` and the CLI."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ("BrokerConfig",)


def _default_users() -> MappingProxyType[str, str]:
    return MappingProxyType({"guest": "guest"})


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Everything the reference broker can be told. Defaults follow RabbitMQ 4.x unless noted.

    Messages live in memory only: durable declarations are accepted and remembered for the life of the
    process, but nothing is written to disk yet.
    """

    host: str = "127.0.0.1"
    """Interface to listen on."""
    port: int = 5672
    """TCP port; 0 picks a free one (see ``Broker.port``)."""
    users: MappingProxyType[str, str] | dict[str, str] = field(default_factory=_default_users)
    """User name -> password for PLAIN authentication; every user may use every vhost."""
    vhosts: tuple[str, ...] | list[str] = ("/",)
    """Virtual hosts that exist; ``connection.open`` of any other gets 530."""
    heartbeat: int = 60
    """Heartbeat interval proposed in ``connection.tune`` (seconds; the client's choice wins)."""
    frame_max: int = 131072
    """Largest frame proposed in ``connection.tune``."""
    channel_max: int = 2047
    """Highest channel number proposed in ``connection.tune``."""
    max_message_size: int = 16 * 1024 * 1024
    """Bodies above this get 406 PRECONDITION_FAILED (RabbitMQ 4.x default, 16 MiB)."""
    max_connections: int | None = None
    """At this many AMQP connections, new sockets are accepted but never answered (like RabbitMQ)."""
    memory_high_watermark: float | int = 0.4
    """Alarm threshold for message memory: a float in (0, 1] is a fraction of total RAM, an int is bytes.

    The default is RabbitMQ 3.x's 0.4 rather than 4.x's 0.6, because here the measure is the bytes of
    messages the broker holds, and a Python process needs roughly as much again for bookkeeping.
    """
    credit: tuple[int, int] = (400, 200)
    """Credit flow ``(InitialCredit, MoreCreditAfter)`` for each channel -> queue link."""
    handshake_timeout: float = 10.0
    """Seconds a new socket has to complete the AMQP handshake."""

    def __post_init__(self) -> None:
        if self.frame_max < 4096:
            raise ValueError(f"frame_max must be at least 4096, got {self.frame_max}")
        if not 1 <= self.channel_max <= 65535:
            raise ValueError(f"channel_max must be in 1..65535, got {self.channel_max}")
        initial, more = self.credit
        if not 0 < more <= initial:
            raise ValueError(
                f"credit must be (initial, more_after) with 0 < more_after <= initial, got {self.credit}"
            )
        if isinstance(self.memory_high_watermark, float) and not 0 < self.memory_high_watermark <= 1:
            raise ValueError("a fractional memory_high_watermark must be in (0, 1]")

    def memory_limit_bytes(self) -> int:
        """The watermark in bytes (fractions are taken of the machine's physical memory)."""
        mark = self.memory_high_watermark
        if isinstance(mark, float):
            return int(mark * _total_memory())
        return int(mark)

    @classmethod
    def from_fields(cls, **fields: Any) -> BrokerConfig:
        """Build a config from keyword fields, rejecting unknown names with a clear error."""
        unknown = set(fields) - set(cls.__dataclass_fields__)
        if unknown:
            raise TypeError(f"unknown broker option(s): {', '.join(sorted(unknown))}")
        return cls(**fields)


def _total_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: assume 4 GiB
        return 4 * 1024**3

"""The short-lived instance the CLI sends from.

Every Gear message has a sender (replies go to its ``TYPE.HOST`` queue), so the CLI is an instance too:
``gear.Service.client()``, which serves nothing, gets a unique HOST and a queue that expires soon after
the command ends. It is bound to no multicast or broadcast key, so it never answers its own ``*.*``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import gear

__all__ = ("CLI_TYPE", "Target", "connect")

CLI_TYPE = "CLI"
"""The TYPE of the CLI's own instance."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where and how long: the broker URLs, the exchange, the command's deadline in seconds, and the
    directory its trace events go to (``None``: off)."""

    urls: tuple[str, ...]
    exchange: str
    timeout: float
    trace: str | None = None


@asynccontextmanager
async def connect(target: Target) -> AsyncIterator[gear.Service]:
    """Connect a calling-only instance; the command's timeout also bounds the connect attempt.

    Raises:
        gear.ConnectError: if no broker answers within the timeout.
        gear.ConfigurationError: for a malformed URL or exchange.
    """
    svc = gear.Service.client(
        CLI_TYPE,
        url=list(target.urls),
        exchange=target.exchange,
        timeout=target.timeout,
        connect_wait=target.timeout,
        trace=target.trace or "off",
    )
    async with svc:
        yield svc

"""The short-lived instance the CLI sends from.

Every Gear message has a sender (replies go to its ``TYPE.HOST`` queue), so the CLI is an instance too:
``gear.Service.client()``, which serves nothing, gets a unique HOST and a queue that expires soon after
the command ends. It is bound to no multicast or broadcast key, so it never answers its own ``*.*``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import gear

__all__ = ("CLI_TYPE", "connect")

CLI_TYPE = "CLI"
"""The TYPE of the CLI's own instance."""


@asynccontextmanager
async def connect(
    urls: Sequence[str],
    timeout: float,  # noqa: ASYNC109 - it also bounds the connect attempt
) -> AsyncIterator[gear.Service]:
    """Connect a calling-only instance; ``timeout`` also bounds how long connecting may take.

    Raises:
        gear.ConnectError: if no broker answers within ``timeout``.
        gear.ConfigurationError: for a malformed URL.
    """
    svc = gear.Service.client(CLI_TYPE, url=list(urls), timeout=timeout, connect_wait=timeout)
    async with svc:
        yield svc

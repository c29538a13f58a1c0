"""The short-lived service instance the CLI sends from.

Every Gear message has a sender (replies go to its ``TYPE.HOST`` queue), so the CLI is a service instance
too: TYPE ``GEARCLI`` and a HOST made of the host name and the process id, so that two shells never share
a reply queue. It registers no handlers of its own.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import gear
from gear.address import default_host

__all__ = ("CLI_TYPE", "cli_host", "connect")

CLI_TYPE = "GEARCLI"
"""The TYPE the CLI's own instance uses (so `gear nodes` can leave it out)."""


def cli_host() -> str:
    """This process's HOST word: ``<hostname>-<pid>``."""
    return f"{default_host()}-{os.getpid()}"


@asynccontextmanager
async def connect(urls: Sequence[str], timeout: float) -> AsyncIterator[gear.Service]:
    """Connect a CLI instance to the broker; ``timeout`` also bounds the connect attempt.

    Raises:
        gear.ConnectError: if no broker answers within ``timeout``.
    """
    svc = gear.Service(
        CLI_TYPE,
        host=cli_host(),
        url=list(urls),
        settings=gear.Settings(connect_wait=max(timeout, 1.0), timeout=timeout),
    )
    async with svc:
        yield svc

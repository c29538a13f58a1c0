"""Run a long-lived coroutine until SIGINT or SIGTERM, then let it stop gracefully."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any

__all__ = ("run_until_signal",)


async def run_until_signal(work: Coroutine[Any, Any, Any]) -> signal.Signals | None:
    """Run ``work``; on SIGINT/SIGTERM cancel it and wait for its cleanup (``finally`` / ``async with``).

    Returns:
        The signal that stopped it, or ``None`` if ``work`` returned on its own.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    received: list[signal.Signals] = []

    def stop(sig: signal.Signals) -> None:
        if not received:
            received.append(sig)
            task.cancel()

    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop, sig)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or Windows
            pass
    try:
        await task
    except asyncio.CancelledError:
        if not received:
            raise
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
    return received[0] if received else None

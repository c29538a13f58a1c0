"""The service ``gear serve`` runs in the drain test: ``work`` takes a while, so SIGTERM finds some in
flight; every setting comes from ``GEAR_*`` variables (URL, TYPE, HOST, metrics port, drain timeout)."""

from __future__ import annotations

import asyncio
import os

import gear

__all__ = ("create_service",)


def create_service() -> gear.Service:
    """A service whose ``work`` sleeps ``DRAIN_TEST_WORK_S`` seconds and says who served it."""
    svc = gear.Service()
    pause = float(os.environ.get("DRAIN_TEST_WORK_S", "0.2"))

    @svc.handler("work")
    async def work(n: int) -> dict[str, object]:
        await asyncio.sleep(pause)
        return {"n": n, "by": svc.identity}

    return svc

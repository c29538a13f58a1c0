"""The demo as one entry point, :func:`run`: what ``gear demo`` starts and walks through.

The CLI loads it by its import path (``gear.examples.demo:run``), so ``gear/cli/`` depends only on
Gear's public API and the example system stays an example. Without URLs it starts Gear's reference
broker in this process on a free port; with URLs it runs against that broker (a RabbitMQ, say) under
TYPE names and an exchange of its own, so that services already running there neither see its messages
nor take its requests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

import gear
from gear.examples.scenario import run_scenario
from gear.examples.system import Names, running_system

__all__ = ("run",)

Say = Callable[[str], None]


@asynccontextmanager
async def _broker(urls: Sequence[str], say: Say) -> AsyncIterator[tuple[list[str], Names]]:
    if urls:
        names = Names.isolated("demo")
        say(f"broker: {', '.join(gear.mask_url(u) for u in urls)}")
        types = f"{names.repo}/{names.ctrl}/{names.web}"
        say(f"        (exchange {names.exchange!r} and TYPEs {types}, so services already running")
        say("        there neither see the demo's messages nor take its requests)")
        yield list(urls), names
        return
    from gear.broker import Broker

    async with Broker(port=0) as server:
        say(f"broker: Gear's reference broker, in this process, at {gear.mask_url(server.url)}")
        yield [server.url], Names()


async def run(
    urls: Sequence[str], *, repos: int = 3, ctrls: int = 2, trace: str | None = None, say: Say = print
) -> dict[str, bool]:
    """Start REPO, CTRL and WEB instances, walk through every routing form, and return the verdict of
    each check (name to passed), in order. Every step is reported through ``say``, one line at a time.

    Raises:
        gear.GearError: the system could not start (e.g. ``ConnectError``).
    """
    say("Gear demo: the seed's WEB/REPO/CTRL system")
    async with (
        _broker(urls, say) as (where, names),
        running_system(
            where,
            repo_hosts=[f"repo{i}" for i in range(1, repos + 1)],
            ctrl_hosts=[f"ctrl{i}" for i in range(1, ctrls + 1)],
            names=names,
            trace=trace,
        ) as system,
    ):
        say("instances: " + " ".join(str(s.address) for s in system.services))
        say("")
        outcome = await run_scenario(system, say)
    return dict(outcome.checks)

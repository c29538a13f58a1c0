"""The whole seed system in one process: several REPO and CTRL instances and one WEB.

Each instance is a real :class:`gear.Service` with its own connection, exactly as if it ran in its own
container; only the process is shared. ``gear demo`` and the example tests use it::

    async with running_system(url) as system:
        stored = await system.web.put("alice", "hello")
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field

import gear
from gear.examples import ctrl, repo, web
from gear.examples.deliveries import DeliveryLog
from gear.tracing import Tracer, combine, tracer_from_env

__all__ = ("DEFAULT_CTRL_HOSTS", "DEFAULT_REPO_HOSTS", "Names", "System", "running_system")

DEFAULT_REPO_HOSTS = ("repo1", "repo2", "repo3")
DEFAULT_CTRL_HOSTS = ("ctrl1", "ctrl2")


@dataclass(frozen=True, slots=True)
class Names:
    """The TYPE names and exchange the system uses.

    On a broker shared with other Gear services (``gear demo --url``), a suffix and a private exchange
    keep the demo's queues and broadcasts apart from theirs: ``Names.isolated("demo")``.
    """

    repo: str = repo.DEFAULT_TYPE
    ctrl: str = ctrl.DEFAULT_TYPE
    web: str = web.DEFAULT_TYPE
    exchange: str = "gear"

    @classmethod
    def isolated(cls, suffix: str) -> Names:
        """Names that cannot collide with a system using the default ones."""
        return cls(
            repo=f"{repo.DEFAULT_TYPE}_{suffix}",
            ctrl=f"{ctrl.DEFAULT_TYPE}_{suffix}",
            web=f"{web.DEFAULT_TYPE}_{suffix}",
            exchange=f"gear.{suffix}",
        )


@dataclass(frozen=True, slots=True)
class System:
    """The running instances."""

    web: web.Web
    repos: tuple[gear.Service, ...]
    ctrls: tuple[gear.Service, ...]
    names: Names
    logs: dict[str, DeliveryLog] = field(default_factory=dict)
    """Per instance (``TYPE.HOST``): what it received."""

    @property
    def services(self) -> tuple[gear.Service, ...]:
        """Every instance, WEB last."""
        return (*self.repos, *self.ctrls, self.web.service)

    def received(self, method: str) -> dict[str, int]:
        """How many ``method`` requests each instance received, by ``TYPE.HOST``."""
        return {address: log.count(method) for address, log in sorted(self.logs.items())}


@asynccontextmanager
async def running_system(
    url: str | Sequence[str],
    *,
    repo_hosts: Sequence[str] = DEFAULT_REPO_HOSTS,
    ctrl_hosts: Sequence[str] = DEFAULT_CTRL_HOSTS,
    web_host: str = "web1",
    names: Names | None = None,
    timeout: float = 5.0,  # noqa: ASYNC109 - the services' default deadline
    trace: str | None = None,
) -> AsyncIterator[System]:
    """Start every instance (concurrently), yield them, and stop them all on exit.

    Each instance reports its deliveries to a :class:`DeliveryLog` (``System.logs``) and, when ``trace``
    names a directory (default: ``GEAR_TRACE``), also writes JSON-lines trace events there.

    Raises:
        gear.ConnectError: if the broker cannot be reached.
    """
    names = names or Names()
    urls = [url] if isinstance(url, str) else list(url)
    # every trace, whatever GEAR_TRACE_SAMPLE says: the delivery logs must see every delivery
    settings = gear.Settings(
        url=tuple(urls), exchange=names.exchange, timeout=timeout, connect_wait=timeout, trace_sample=1.0
    )
    logs: dict[str, DeliveryLog] = {}
    tracers: list[Tracer] = []

    def log_for(type_: str, host: str) -> Tracer:
        log = logs.setdefault(f"{type_}.{host}", DeliveryLog())
        files = tracer_from_env(type_, host, f"{type_}.{host}.{os.getpid()}", directory=trace)
        tracers.append(files)
        return combine(log, files)

    repos = tuple(
        repo.create_service(h, urls, type_=names.repo, settings=settings, tracer=log_for(names.repo, h))
        for h in repo_hosts
    )
    ctrls = tuple(
        ctrl.create_service(
            h,
            urls,
            repo_hosts=repo_hosts,
            type_=names.ctrl,
            repo_type=names.repo,
            settings=settings,
            tracer=log_for(names.ctrl, h),
        )
        for h in ctrl_hosts
    )
    front = web.create_web(
        web_host,
        urls,
        repo_hosts=repo_hosts,
        type_=names.web,
        repo_type=names.repo,
        ctrl_type=names.ctrl,
        settings=settings,
        tracer=log_for(names.web, web_host),
    )
    system = System(web=front, repos=repos, ctrls=ctrls, names=names, logs=logs)
    async with AsyncExitStack() as stack:
        for tracer in tracers:  # closed last, after every instance stopped
            stack.callback(tracer.close)
        # Start them all at once; the stack stops whichever started, in reverse order, on any exit.
        services = system.services
        results = await asyncio.gather(*(s.start() for s in services), return_exceptions=True)
        for svc, result in zip(services, results, strict=True):
            if not isinstance(result, BaseException):
                stack.push_async_callback(svc.stop)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        yield system

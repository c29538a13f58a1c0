"""WEB: the client-facing service, and the one that uses all four address forms.

=============================  ============  =================================================
what                           address       why
=============================  ============  =================================================
store a value                  REPO.<host>   stateful: the host is picked by consistent hashing
look a value up                CTRL          stateless: any CTRL instance will do
push a new configuration       CTRL.*        multicast: every CTRL instance must apply it
ask everyone to refresh        \\*.\\*         broadcast: every instance of every type
=============================  ============  =================================================

Each of them is a call on a typed proxy of the example's contracts (``gear.examples.contracts``):
``await web.ctrl.lookup(ItemQuery(key="alice"))`` is checked by mypy and returns an ``ItemFound``.

``python -m gear.examples.web --port 8080`` also serves a tiny HTTP front end (standard library only; on
127.0.0.1 unless ``--bind 0.0.0.0``)::

    curl -X PUT localhost:8080/items/alice -d hello     # -> REPO.<host>
    curl localhost:8080/items/alice                     # -> CTRL -> REPO.<host>
    curl -X POST localhost:8080/reload -d 7             # -> CTRL.*
    curl -X POST localhost:8080/refresh                 # -> *.*
    curl localhost:8080/status                          # gather *.* status
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import gear
from gear.examples import ctrl, repo
from gear.examples.contracts import Ctrl, Instance, Repo
from gear.examples.hashring import HashRing
from gear.examples.models import (
    ExportQuery,
    ExportReport,
    InstanceStatus,
    Item,
    ItemFound,
    ItemQuery,
    Refresh,
    ReloadConfig,
    StatusQuery,
    Stored,
)
from gear.tracing.api import Tracer

__all__ = ("DEFAULT_TYPE", "Web", "WebHandlers", "create_web", "main", "serve_http", "start_http")

DEFAULT_TYPE = "WEB"


@dataclass
class Web:
    """A WEB instance: its service, the REPO ring, and the four operations the front end offers, each
    made through a typed proxy of the example's contracts."""

    service: gear.Service
    ring: HashRing
    repo_type: str = repo.DEFAULT_TYPE
    ctrl_type: str = ctrl.DEFAULT_TYPE
    refreshes: int = 0
    config_version: int = field(default=0)
    ctrl: Ctrl = field(init=False)
    """Any one CTRL instance (``CTRL``, round-robin)."""
    every_ctrl: Ctrl = field(init=False)
    """Every CTRL instance (``CTRL.*``)."""
    everyone: Instance = field(init=False)
    """Every instance of every TYPE (``*.*``)."""
    _repos: dict[str, Repo] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.ctrl = self.service.proxy(Ctrl, self.ctrl_type)
        self.every_ctrl = self.service.proxy(Ctrl, f"{self.ctrl_type}.*")
        self.everyone = self.service.proxy(Instance, "*.*")

    def repo_for(self, key: str) -> str:
        """The point-to-point address of the REPO instance that holds ``key``."""
        return f"{self.repo_type}.{self.ring.host_for(key)}"

    def repo(self, key: str) -> Repo:
        """The proxy of the REPO instance that holds ``key`` (one per instance)."""
        address = self.repo_for(key)
        found = self._repos.get(address)
        if found is None:
            found = self._repos[address] = self.service.proxy(Repo, address)
        return found

    async def put(self, key: str, value: str, timeout: float = 5.0) -> Stored:  # noqa: ASYNC109
        """Store ``value`` on the REPO instance that owns ``key`` (point-to-point)."""
        item = Item(key=key, value=value)  # a bad key fails here, before anything is sent
        return await gear.with_timeout(self.repo(key), timeout).put(item)

    async def lookup(self, key: str, timeout: float = 5.0) -> ItemFound:  # noqa: ASYNC109
        """Ask any CTRL instance (round-robin); it asks the owning REPO within our deadline."""
        return await gear.with_timeout(self.ctrl, timeout).lookup(ItemQuery(key=key))

    async def export(self, keys: Sequence[str], timeout: float = 5.0) -> ExportReport:  # noqa: ASYNC109
        """Ask any CTRL for a report on ``keys``; its plain handler asks each owning REPO in turn."""
        return await gear.with_timeout(self.ctrl, timeout).export(ExportQuery(keys=list(keys)))

    async def reload(self, version: int, repo_hosts: Sequence[str] = ()) -> None:
        """Push configuration ``version`` to every CTRL instance (multicast, fire-and-forget)."""
        await self.every_ctrl.reload(ReloadConfig(version=version, repo_hosts=list(repo_hosts)))
        self.config_version = version

    async def refresh(self, reason: str = "") -> None:
        """Tell every instance of every type to refresh (broadcast, fire-and-forget)."""
        await self.everyone.refresh(Refresh(reason=reason))

    async def census(
        self,
        address: str = "*.*",
        timeout: float = 2.0,  # noqa: ASYNC109 - a gather's deadline is the API
        expected: int | None = None,
    ) -> list[gear.Answer[InstanceStatus]]:
        """Every instance's ``status`` behind a fan-out address (scatter-gather)."""
        instances = self.service.proxy(Instance, address)
        return await gear.gather(instances.status, StatusQuery(), timeout=timeout, expected=expected)


class WebHandlers(Instance):
    """WEB's side of the :class:`~gear.examples.contracts.Instance` contract."""

    def __init__(self, web: Web) -> None:
        self.web = web

    async def status(self, query: StatusQuery) -> InstanceStatus:
        web = self.web
        return InstanceStatus(
            type=web.service.type,
            host=web.service.host,
            config_version=web.config_version,
            refreshes=web.refreshes,
            keys=list(web.ring.hosts) if query.verbose else [],
        )

    async def refresh(self, notice: Refresh) -> None:
        self.web.refreshes += 1


def create_web(
    host: str | None = None,
    url: str | list[str] | None = None,
    *,
    repo_hosts: Sequence[str] | None = None,
    type_: str | None = None,
    repo_type: str = repo.DEFAULT_TYPE,
    ctrl_type: str = ctrl.DEFAULT_TYPE,
    settings: gear.Settings | None = None,
    tracer: Tracer | None = None,
) -> Web:
    """Build a WEB instance (not started); ``repo_hosts`` defaults to ``REPO_HOSTS``."""
    settings = settings or gear.Settings()
    svc = gear.Service(
        type_ or settings.type or DEFAULT_TYPE, host=host, url=url, settings=settings, tracer=tracer
    )
    hosts = repo_hosts if repo_hosts is not None else ctrl.repo_hosts_from_env()
    web = Web(service=svc, ring=HashRing(hosts), repo_type=repo_type, ctrl_type=ctrl_type)
    svc.implement(Instance, WebHandlers(web))
    return web


# --- a deliberately small HTTP front end (asyncio streams, no framework) -----------------------------

_ERRORS: dict[type[Exception], int] = {
    gear.CallTimeoutError: 504,
    gear.UnroutableError: 503,
    gear.BadPayloadError: 400,
    gear.RemoteError: 502,
}


async def _route(web: Web, verb: str, path: str, body: str) -> tuple[int, Any]:
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if parts[:1] == ["items"] and len(parts) == 2:
        if verb == "GET":
            return 200, (await web.lookup(parts[1])).model_dump()
        if verb in ("PUT", "POST"):
            return 200, (await web.put(parts[1], body)).model_dump()
    if parts == ["reload"] and verb == "POST":
        await web.reload(int(body or web.config_version + 1))
        return 202, {"reload": "sent to every CTRL"}
    if parts == ["refresh"] and verb == "POST":
        await web.refresh("http")
        return 202, {"refresh": "sent to every instance"}
    if parts == ["status"] and verb == "GET":
        answers = await web.census()
        return 200, [{"sender": a.sender, "result": a.result and a.result.model_dump()} for a in answers]
    return 404, {"error": f"no route for {verb} {path}"}


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, str]:
    """``(verb, path, body)`` of one HTTP/1.1 request.

    Raises:
        ValueError: for a malformed request line or Content-Length.
    """
    request_line = (await reader.readline()).decode("latin-1").split()
    headers: dict[str, str] = {}
    while line := (await reader.readline()).decode("latin-1").strip():
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if len(request_line) < 2:
        raise ValueError("bad request line")
    length = int(headers.get("content-length", "0"))
    if not 0 <= length <= 1_000_000:
        raise ValueError("bad Content-Length")
    body = (await reader.readexactly(length)).decode()
    return request_line[0], request_line[1], body


async def _handle(web: Web, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        try:
            code, result = await _route(web, *await _read_request(reader))
        except (ValueError, asyncio.IncompleteReadError) as exc:
            code, result = 400, {"error": str(exc)}
        except gear.GearError as exc:
            # Gear's typed errors map onto HTTP statuses: the client sees why, not just "500".
            status = next((c for cls, c in _ERRORS.items() if isinstance(exc, cls)), 500)
            code, result = status, {"error": type(exc).__name__, "message": str(exc)}
        payload = json.dumps(result).encode()
        writer.write(
            f"HTTP/1.1 {code} {'OK' if code < 400 else 'Error'}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode()
            + payload
        )
        await writer.drain()
    finally:
        writer.close()


async def start_http(web: Web, port: int, bind: str = "127.0.0.1") -> asyncio.Server:
    """Start the HTTP front end of an already started WEB instance (``port=0`` picks a free one)."""
    return await asyncio.start_server(lambda r, w: _handle(web, r, w), bind, port)


async def serve_http(web: Web, port: int, bind: str = "127.0.0.1") -> None:
    """Run the WEB instance and its HTTP front end until SIGTERM/SIGINT or cancellation."""
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if task is not None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)  # `docker stop` sends SIGTERM: stop cleanly
    async with web.service:
        server = await start_http(web, port, bind)
        async with server:
            print(f"WEB {web.service.address} serving HTTP on {bind}:{port}", flush=True)
            with contextlib.suppress(asyncio.CancelledError):
                await server.serve_forever()


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m gear.examples.web --port 8080``: GEAR_URL, GEAR_HOST, REPO_HOSTS from the environment."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument(
        "--bind",
        default="127.0.0.1",
        help="the interface to listen on (0.0.0.0: every one, as in a container)",
    )
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_http(create_web(), args.port, args.bind))


if __name__ == "__main__":
    main()

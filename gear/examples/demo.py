"""The demo as two entry points: :func:`run`, what ``gear demo`` starts and walks through, and
:func:`serve`, what ``gear demo --serve`` keeps running for you to try by hand.

The CLI loads it by its import path (``gear.examples.demo:run``), so ``gear/cli/`` depends only on
Gear's public API and the example system stays an example. Without URLs it starts Gear's reference
broker in this process on a free port; with URLs it runs against that broker (a RabbitMQ, say) under
TYPE names and an exchange of its own, so that services already running there neither see its messages
nor take its requests.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

import gear
from gear.examples.hashring import HashRing
from gear.examples.scenario import run_scenario
from gear.examples.system import Names, System, running_system
from gear.examples.web import start_http

__all__ = ("export_line", "run", "serve", "try_commands")

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


@asynccontextmanager
async def _system(
    urls: Sequence[str], repos: int, ctrls: int, trace: str | None, say: Say
) -> AsyncIterator[tuple[list[str], System]]:
    """The broker's URLs (an embedded broker without ``urls``) and the example system running on it."""
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
        yield where, system


async def run(
    urls: Sequence[str], *, repos: int = 3, ctrls: int = 2, trace: str | None = None, say: Say = print
) -> dict[str, bool]:
    """Start REPO, CTRL and WEB instances, walk through every routing form, and return the verdict of
    each check (name to passed), in order. Every step is reported through ``say``, one line at a time.

    Raises:
        gear.GearError: the system could not start (e.g. ``ConnectError``).
    """
    say("Gear demo: the example system (WEB front end, REPO repository, CTRL controller)")
    async with _system(urls, repos, ctrls, trace, say) as (_, system):
        say("instances: " + " ".join(str(s.address) for s in system.services))
        say("")
        outcome = await run_scenario(system, say)
    return dict(outcome.checks)


def export_line(urls: Sequence[str]) -> str:
    """The shell line that points ``gear`` commands at ``urls``: ``export GEAR_URL=...`` as given, or,
    when a URL holds a password (never printed), a comment saying to export the URL given to --url.

    Every line the demo prints can be pasted as it is: a masked ``***`` in an export line could not.
    """
    if any(gear.mask_url(u) != u for u in urls):
        return "# export GEAR_URL=<the --url you gave> (not printed here: it holds a password)"
    return f"export GEAR_URL={shlex.quote(','.join(urls))}"


def try_commands(system: System, url: str | None, http: str) -> list[str]:
    """Commands to type in another terminal against a running :func:`serve`, each one a shell line.

    ``url`` is the broker URL to export as ``GEAR_URL`` (``None``: the user gave it already); ``http``
    is WEB's base URL.
    """
    names = system.names
    owner = HashRing(s.host for s in system.repos).host_for("alice")
    opt = "" if names.exchange == "gear" else f" --exchange {names.exchange}"
    item = shlex.quote('{"key":"alice","value":"hello"}')
    query = shlex.quote('{"key":"alice"}')
    lines = [f"export GEAR_URL={shlex.quote(url)}"] if url else []
    return [
        *lines,
        f"gear nodes{opt}",
        f"gear send p2p {names.repo} {owner} put -d {item} --call{opt}",
        f"gear send stateless {names.ctrl} lookup -d {query} --call{opt}",
        f"gear send multicast {names.ctrl} status --call{opt}",
        f"gear send broadcast status --call{opt}",
        f"curl -s -X PUT {http}/items/bob -d world",
        f"curl -s {http}/items/bob",
        f"curl -s {http}/status",
    ]


async def serve(
    urls: Sequence[str],
    *,
    repos: int = 3,
    ctrls: int = 2,
    http_port: int = 8080,
    bind: str = "127.0.0.1",
    trace: str | None = None,
    say: Say = print,
) -> None:
    """Start the system (on an embedded broker without ``urls``), WEB's HTTP front end on ``bind``
    (``http_port``, or a free port if it is taken), print where everything is and commands to try, and
    run until cancelled (Ctrl-C in ``gear demo --serve``).

    Raises:
        gear.GearError: the system could not start (e.g. ``ConnectError``).
        OSError: the HTTP front end could not listen on ``bind``.
    """
    say("Gear demo: REPO, CTRL and WEB instances, running until Ctrl-C")
    async with _system(urls, repos, ctrls, trace, say) as (where, system):
        try:
            server = await start_http(system.web, http_port, bind)
        except OSError:
            if http_port == 0:
                raise
            server = await start_http(system.web, 0, bind)  # the port is taken: any free one
        async with server:
            port = server.sockets[0].getsockname()[1]
            http = f"http://{bind}:{port}"
            say("instances: " + " ".join(str(s.address) for s in system.services))
            say(f"WEB HTTP: {http}  ({system.web.service.address})")
            say("")
            say("Try, in another terminal:")
            if urls:
                say(f"  {export_line(urls)}")
            for line in try_commands(system, None if urls else where[0], http):
                say(f"  {line}")
            say("")
            say("Ctrl-C stops every instance" + ("" if urls else " and the broker") + ".")
            await asyncio.Event().wait()  # until cancelled

"""The two brokers the integration suite runs against, behind one small handle.

``reference`` is Gear's own broker started in-process on a free port. ``rabbitmq`` is a real RabbitMQ,
found in this order:

1. ``GEAR_TEST_AMQP_URL`` (``rabbitmqctl`` on this machine controls it, if present);
2. else, when a Docker engine answers, a container started through testcontainers from
   ``GEAR_TEST_RABBITMQ_IMAGE`` (default ``rabbitmq:3.13-management``; ``scripts/debian_images.py``
   builds a local one where no registry is reachable), controlled with ``docker exec rabbitmqctl``;
3. else the rabbitmq tests skip, saying how to get one.

Nothing is looked for until a selected test asks for RabbitMQ, so ``-m "not rabbitmq"`` never starts a
container. Tests that disturb the broker (drop every connection, raise a memory alarm, restart it) do it
through the handle, so the same test body runs on every backend; those that would stop or force-close a
shared RabbitMQ check ``may_disrupt`` first.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import subprocess
import tempfile
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.rabbitmq_container import RabbitMQContainer

__all__ = ("ENV_DISRUPTIVE", "ENV_URL", "BrokerHandle", "RabbitMQ", "find_rabbitmq")

ENV_URL = "GEAR_TEST_AMQP_URL"
ENV_DISRUPTIVE = "GEAR_TEST_DISRUPTIVE"
"""Set to 1 to allow tests that stop or force-close the RabbitMQ at ``GEAR_TEST_AMQP_URL`` (CI sets it:
it has that broker to itself). ``GEAR_TEST_CLOSE_ALL``, its older name, still works."""

Ctl = Callable[[Sequence[str]], str]


@dataclass
class RabbitMQ:
    """A real RabbitMQ for the session: where it is, how to control it, and whether the tests own it."""

    url: str
    ctl: Ctl | None
    exclusive: bool
    """The tests own it (a container, or ``GEAR_TEST_DISRUPTIVE`` is set): they may stop it or close
    every connection on it."""
    where: str
    container: RabbitMQContainer | None = None

    @contextlib.contextmanager
    def file_for_node(self, text: str, suffix: str = ".json") -> Iterator[str]:
        """Put ``text`` in a file the RabbitMQ node can read (``rabbitmqctl import_definitions``, say);
        yield the path as the node sees it, and remove the file afterwards."""
        if self.container is not None:
            path = self.container.put_file(text.encode(), suffix)
            try:
                yield path
            finally:
                with contextlib.suppress(RuntimeError):
                    self.container.exec(["rm", "-f", path])
            return
        shared = Path(tempfile.mkdtemp(prefix="gear-node-"))  # the node runs as another user
        try:
            shared.chmod(0o755)
            file = shared / f"file{suffix}"
            file.write_text(text)
            file.chmod(0o644)
            yield str(file)
        finally:
            shutil.rmtree(shared)

    def close(self) -> None:
        """Stop the container, if this session started one."""
        if self.container is not None:
            self.container.stop()
            self.container = None


@dataclass
class BrokerHandle:
    """What a test needs to know and do about the broker under test."""

    kind: str
    url: str
    broker: Any = None
    ctl: Ctl | None = None
    exclusive: bool = False
    """No one else uses this broker (a container, or ``GEAR_TEST_DISRUPTIVE`` is set)."""

    @property
    def is_reference(self) -> bool:
        return self.kind == "reference"

    @property
    def may_disrupt(self) -> bool:
        """True when the tests may stop or force-close this broker (never a shared one by default)."""
        return self.is_reference or self.exclusive

    def url_with(self, **query: str) -> str:
        """The broker URL with extra query parameters (e.g. ``heartbeat``)."""
        parts = urllib.parse.urlsplit(self.url)
        params = dict(urllib.parse.parse_qsl(parts.query))
        params.update(query)
        return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(params)))

    async def close_all_connections(self) -> None:
        """Force-close every client connection, as ``rabbitmqctl close_all_connections`` does."""
        if self.is_reference:
            await self.broker.close_all_connections("closed by test")
            return
        await asyncio.to_thread(self._rabbitmqctl, ["close_all_connections", "closed by test"])

    async def set_memory_alarm(self, active: bool) -> None:
        """Raise or clear the memory alarm (RabbitMQ: a tiny ``vm_memory_high_watermark``)."""
        if self.is_reference:
            self.broker.set_memory_alarm(active)
            return
        if active:
            await asyncio.to_thread(self._rabbitmqctl, ["set_vm_memory_high_watermark", "0.0000001"])
        else:
            await asyncio.to_thread(self._rabbitmqctl, ["set_vm_memory_high_watermark", "0.4"])

    async def restart(self, down_for: float) -> None:
        """Stop the broker, keep it down for ``down_for`` seconds, start it again on the same port.

        The reference broker without a data directory comes back empty (durable queues included);
        with one, and RabbitMQ (``stop_app``/``start_app``), durable queues, exchanges and bindings
        and persistent messages come back.
        """
        if self.is_reference:
            from gear.broker import Broker

            old = self.broker
            port = old.port
            await old.stop()
            await asyncio.sleep(down_for)
            self.broker = Broker(dataclasses.replace(old.config, port=port))
            await self.broker.start()
            return
        await asyncio.to_thread(self._rabbitmqctl, ["stop_app"])
        try:
            await asyncio.sleep(down_for)
        finally:
            await asyncio.to_thread(self._rabbitmqctl, ["start_app"])

    def _rabbitmqctl(self, args: Sequence[str]) -> str:
        if self.ctl is None:
            raise RuntimeError("this RabbitMQ cannot be controlled from the tests")
        return self.ctl(args)


def local_rabbitmqctl(args: Sequence[str]) -> str:
    """Run ``rabbitmqctl`` on this machine."""
    done = subprocess.run(["rabbitmqctl", *args], check=True, capture_output=True, text=True, timeout=60)
    return done.stdout


def _docker_answers() -> str | None:
    """None if a Docker engine answers, else why not."""
    try:
        import docker  # type: ignore[import-untyped]

        client = docker.from_env(timeout=10)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:  # no engine, no socket, no permission: all mean "no Docker here"
        return f"{type(exc).__name__}: {exc}"
    return None


def find_rabbitmq() -> tuple[RabbitMQ | None, str]:
    """A RabbitMQ for the session (starting a container if need be), or None and why there is none.

    Raises:
        docker.errors.DockerException, TimeoutError: if a Docker engine answers but the container does
            not start: a broken setup is an error, not a skip.
    """
    url = os.environ.get(ENV_URL)
    if url:
        ctl = local_rabbitmqctl if shutil.which("rabbitmqctl") else None
        exclusive = bool(os.environ.get(ENV_DISRUPTIVE) or os.environ.get("GEAR_TEST_CLOSE_ALL"))
        return RabbitMQ(url, ctl, exclusive=exclusive, where=ENV_URL), ""
    if (why := _docker_answers()) is not None:
        return None, (
            f"no RabbitMQ: set {ENV_URL}=amqp://guest:guest@127.0.0.1:5672/, or make a Docker engine "
            f"answer for testcontainers (scripts/docker_engine.py start); Docker said {why}"
        )
    container = RabbitMQContainer()
    container.start()
    where = f"container {container.name} ({container.image}) at {container.url}"
    return RabbitMQ(container.url, container.ctl, exclusive=True, where=where, container=container), ""

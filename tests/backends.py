"""The two brokers the integration suite runs against, behind one small handle.

``reference`` is Gear's own broker started in-process on a free port; ``rabbitmq`` is a real RabbitMQ
from ``GEAR_TEST_AMQP_URL`` or, when a Docker engine is reachable, a testcontainers RabbitMQ. Tests that
need to disturb the broker (drop connections, raise a memory alarm) do it through the handle, so the
same test body runs on both.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import subprocess
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ("ENV_DISRUPTIVE", "BrokerHandle", "rabbitmq_url_or_skip_reason")

ENV_URL = "GEAR_TEST_AMQP_URL"
ENV_DISRUPTIVE = "GEAR_TEST_DISRUPTIVE"
"""Set to 1 to allow tests that stop or force-close a shared RabbitMQ (CI sets it; it runs alone)."""


@dataclass
class BrokerHandle:
    """What a test needs to know and do about the broker under test."""

    kind: str
    url: str
    broker: Any = None
    ctl: Callable[[Sequence[str]], str] | None = None
    _alarm_restore: str | None = field(default=None, repr=False)

    @property
    def is_reference(self) -> bool:
        return self.kind == "reference"

    @property
    def may_disrupt(self) -> bool:
        """True when the tests may stop or force-close this broker (never a shared one by default)."""
        allowed = os.environ.get(ENV_DISRUPTIVE) or os.environ.get("GEAR_TEST_CLOSE_ALL")
        return self.is_reference or bool(allowed)

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

        The reference broker keeps messages in memory, so it comes back empty (durable queues
        included) until it is given a data directory; RabbitMQ (``stop_app``/``start_app``) keeps
        durable queues and persistent messages.
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
    done = subprocess.run(
        ["rabbitmqctl", *args], check=True, capture_output=True, text=True, timeout=60
    )
    return done.stdout


def rabbitmq_url_or_skip_reason() -> tuple[str | None, Callable[[Sequence[str]], str] | None, str]:
    """Find a RabbitMQ: the environment's URL, else a testcontainers one, else a reason to skip."""
    url = os.environ.get(ENV_URL)
    if url:
        ctl = local_rabbitmqctl if shutil.which("rabbitmqctl") else None
        return url, ctl, ""
    try:
        import docker  # type: ignore[import-untyped]

        docker.from_env().ping()
    except Exception as exc:  # no Docker engine: the common case on CI machines here
        return None, None, (
            f"no RabbitMQ: set {ENV_URL}=amqp://guest:guest@127.0.0.1:5672/ "
            f"or make a Docker engine reachable for testcontainers ({type(exc).__name__})"
        )
    return _start_container()


_container: Any = None


def _start_container() -> tuple[str | None, Callable[[Sequence[str]], str] | None, str]:
    global _container
    from testcontainers.rabbitmq import RabbitMqContainer

    if _container is None:
        _container = RabbitMqContainer("rabbitmq:3.13-management")
        _container.start()
    host = _container.get_container_host_ip()
    port = _container.get_exposed_port(5672)
    container = _container

    def ctl(args: Sequence[str]) -> str:
        code, output = container.exec(["rabbitmqctl", *args])
        if code != 0:
            raise RuntimeError(output.decode(errors="replace"))
        return str(output.decode(errors="replace"))

    return f"amqp://guest:guest@{host}:{port}/", ctl, ""


def stop_container() -> None:
    """Stop the testcontainers RabbitMQ if this session started one."""
    global _container
    if _container is not None:
        _container.stop()
        _container = None

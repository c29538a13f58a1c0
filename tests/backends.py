"""The two brokers the integration suite runs against, behind one small handle.

``reference`` is Gear's own broker started in-process on a free port. ``rabbitmq`` is a real RabbitMQ,
found in this order:

1. ``GEAR_TEST_AMQP_URL``, controlled by the command in ``GEAR_TEST_RABBITMQCTL`` (say
   ``docker exec NAME rabbitmqctl``), else by this machine's ``rabbitmqctl`` only if the node it
   reaches listens on the URL's port (so a URL that names another broker never gets the system node's
   users, alarms and closed connections), else by nothing (the tests that need it skip and say why);
2. else, when containers are asked for (``GEAR_TEST_CONTAINERS=1``, or ``GEAR_TEST_RABBITMQ_IMAGE``
   set, as ``scripts/docker_engine.py run --images`` does) and a Docker engine answers, a container
   started through testcontainers from ``GEAR_TEST_RABBITMQ_IMAGE`` (default ``rabbitmq:4-management``;
   ``scripts/debian_images.py`` builds local ones with RabbitMQ 3.10, 4.0 or 4.3 where no registry is
   reachable), controlled with ``docker exec rabbitmqctl``;
3. else the rabbitmq tests skip, saying how to get one.

Every backend knows which broker it is (``product``, ``version``, from ``connection.start``) and which
RabbitMQ behaviour it shows (``semantics``): tests that differ between releases assert the behaviour
of the release they talk to (tests/conformance/__init__.py lists the differences).

Nothing is looked for until a selected test asks for RabbitMQ, so ``-m "not rabbitmq"`` never starts a
container. Tests that disturb the broker (drop every connection, raise a memory alarm, restart it) do it
through the handle, so the same test body runs on every backend; those that would stop or force-close a
shared RabbitMQ check ``may_disrupt`` first.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pamqp import commands, frame
from pamqp.exceptions import UnmarshalingException

from gear.base.redact import mask_url
from tests.rabbitmq_container import RabbitMQContainer

__all__ = (
    "ENV_CONTAINERS",
    "ENV_CTL",
    "ENV_DISRUPTIVE",
    "ENV_MANAGEMENT",
    "ENV_ROOT",
    "ENV_URL",
    "REFERENCE_SEMANTICS",
    "BrokerHandle",
    "RabbitMQ",
    "containers_asked",
    "find_rabbitmq",
    "server_properties",
)

ENV_URL = "GEAR_TEST_AMQP_URL"
ENV_MANAGEMENT = "GEAR_TEST_MANAGEMENT_URL"
"""The management API of the RabbitMQ at ``GEAR_TEST_AMQP_URL``, if it has one (``gear doctor``'s tests)."""
ENV_ROOT = "GEAR_TEST_RABBITMQ_ROOT"
"""The directory the RabbitMQ at ``GEAR_TEST_AMQP_URL`` sees as ``/`` (a chroot's root: files it must read
go there); unset: this machine's ``/``."""
ENV_CTL = "GEAR_TEST_RABBITMQCTL"
"""The command that controls the RabbitMQ at ``GEAR_TEST_AMQP_URL`` (rabbitmqctl's arguments follow it)."""
REFERENCE_SEMANTICS = (4, 0)
"""The RabbitMQ release whose behaviour the reference broker follows where releases differ: 4.0
(tests/conformance/__init__.py lists the rules, and where 4.3 differs)."""
ENV_CONTAINERS = "GEAR_TEST_CONTAINERS"
"""Set to 1 to let the tests start containers (a RabbitMQ through testcontainers, the compose system);
``GEAR_TEST_RABBITMQ_IMAGE`` being set asks for them too."""
ENV_DISRUPTIVE = "GEAR_TEST_DISRUPTIVE"
"""Set to 1 to allow tests that stop or force-close the RabbitMQ at ``GEAR_TEST_AMQP_URL`` (CI sets it:
it has that broker to itself). ``GEAR_TEST_CLOSE_ALL``, its older name, still works."""

Ctl = Callable[[Sequence[str]], str]


def server_properties(url: str, timeout: float = 10.0) -> dict[str, Any]:
    """The ``server_properties`` of the broker at an ``amqp://`` URL, read from its ``connection.start``.

    Raises:
        OSError: the broker cannot be reached or closed the socket before ``connection.start``.
        TimeoutError: no ``connection.start`` within ``timeout`` seconds.
    """
    parts = urllib.parse.urlsplit(url)
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 5672), timeout) as sock:
        sock.sendall(b"AMQP\x00\x00\x09\x01")
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                raise OSError(f"{parts.hostname}:{parts.port} closed the socket before connection.start")
            data += chunk
            with contextlib.suppress(UnmarshalingException):
                _, _, start = frame.unmarshal(data)
                if isinstance(start, commands.Connection.Start):
                    return {key: _text(value) for key, value in start.server_properties.items()}


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def version_tuple(text: str) -> tuple[int, ...]:
    """``"4.3.6"`` -> ``(4, 3, 6)``; a suffix (``+dfsg``, ``-rc.1``) ends the numbers; ``()`` for none."""
    found = re.match(r"\d+(?:\.\d+)*", text)
    return tuple(int(n) for n in found.group(0).split(".")) if found else ()


class CommandCtl:
    """``rabbitmqctl`` as a command line (a local binary with ``-n NODE``, ``docker exec ...``)."""

    def __init__(self, command: Sequence[str]) -> None:
        self.command = list(command)

    def __call__(self, args: Sequence[str]) -> str:
        """Run it with ``args``; returns its output.

        Raises:
            subprocess.CalledProcessError: if it fails.
        """
        done = subprocess.run([*self.command, *args], check=True, capture_output=True, text=True, timeout=60)
        return done.stdout

    def __repr__(self) -> str:
        return shlex.join(self.command)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def ctl_for_url(url: str) -> tuple[Ctl | None, str]:
    """How to control the RabbitMQ at ``url``, and in words which node that is (or why there is none).

    ``GEAR_TEST_RABBITMQCTL`` if set; else this machine's ``rabbitmqctl``, pinned to its node with
    ``-n``, if that node has an AMQP listener on the URL's port; else None.
    """
    if command := os.environ.get(ENV_CTL):
        return CommandCtl(shlex.split(command)), f"{ENV_CTL}={command}"
    local = shutil.which("rabbitmqctl")
    if local is None:
        return None, f"no rabbitmqctl on this machine; set {ENV_CTL} to the command that controls {url}"
    parts = urllib.parse.urlsplit(url)
    try:
        status = json.loads(CommandCtl([local, "-q", "status", "--formatter", "json"])([]))
    except (subprocess.SubprocessError, OSError, ValueError) as exc:
        return None, f"the local rabbitmqctl reaches no node ({exc}); set {ENV_CTL}"
    amqp = [entry for entry in status.get("listeners", []) if entry.get("protocol") == "amqp"]
    nodes = {entry.get("node") for entry in amqp if entry.get("port") == (parts.port or 5672)}
    if _is_loopback(parts.hostname or "") and len(nodes) == 1 and None not in nodes:
        (node,) = nodes
        return CommandCtl([local, "-n", str(node)]), f"rabbitmqctl -n {node}"
    ports = sorted({entry.get("port") for entry in amqp})
    return None, (
        f"the local rabbitmqctl controls a node with AMQP on port(s) {ports}, not the broker at "
        f"{parts.hostname}:{parts.port}; set {ENV_CTL} to the command that controls it"
    )


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
    ctl_note: str = ""
    """Which node ``ctl`` controls, or why there is no ``ctl``."""
    version: tuple[int, ...] = ()
    """RabbitMQ's version, from its ``connection.start``."""

    def __post_init__(self) -> None:
        if not self.version:
            self.version = version_tuple(str(server_properties(self.url).get("version", "")))

    @property
    def management_url(self) -> str | None:
        """The management HTTP API's base URL, where the tests know it: a container they started, or
        ``GEAR_TEST_MANAGEMENT_URL`` for the broker at ``GEAR_TEST_AMQP_URL``."""
        if self.container is None:
            return os.environ.get(ENV_MANAGEMENT) or None
        return f"http://127.0.0.1:{self.container.ports.management}/"

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
        root = Path(os.environ.get(ENV_ROOT) or "/")  # a node in a chroot sees its root as /
        (root / "tmp").mkdir(exist_ok=True)
        shared = Path(
            tempfile.mkdtemp(prefix="gear-node-", dir=root / "tmp")
        )  # the node runs as another user
        try:
            shared.chmod(0o755)
            file = shared / f"file{suffix}"
            file.write_text(text)
            file.chmod(0o644)
            yield "/" + str(file.relative_to(root))
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
    version: tuple[int, ...] = ()
    """RabbitMQ's version (from ``connection.start``); empty for the reference broker."""
    ctl_note: str = ""
    """Which node ``ctl`` controls, or why there is none (a skip reason)."""
    management_url: str | None = None

    @property
    def is_reference(self) -> bool:
        return self.kind == "reference"

    @property
    def semantics(self) -> tuple[int, int]:
        """The RabbitMQ release whose behaviour this broker shows where releases differ: RabbitMQ's own
        (major, minor), or :data:`REFERENCE_SEMANTICS` for the reference broker."""
        if self.is_reference:
            return REFERENCE_SEMANTICS
        major, minor = (*self.version, 0, 0)[:2]
        return major, minor

    @property
    def name(self) -> str:
        """``reference`` or ``RabbitMQ 4.3.6``, for messages."""
        return "reference" if self.is_reference else "RabbitMQ " + ".".join(map(str, self.version))

    @classmethod
    def of(cls, found: RabbitMQ) -> BrokerHandle:
        """The handle of the session's RabbitMQ."""
        return cls(
            kind="rabbitmq",
            url=found.url,
            ctl=found.ctl,
            exclusive=found.exclusive,
            version=found.version,
            ctl_note=found.ctl_note,
            management_url=found.management_url,
        )

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
        """Run the broker's own ``rabbitmqctl``; skips the test when there is none (``ctl_note`` says why)."""
        if self.ctl is None:
            pytest.skip(f"this RabbitMQ cannot be controlled from the tests: {self.ctl_note}")
        return self.ctl(args)


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


def containers_asked() -> bool:
    """Whether this run may start containers (``GEAR_TEST_CONTAINERS=1`` or an image named)."""
    flag = os.environ.get(ENV_CONTAINERS, "").strip().lower() in ("1", "true", "yes")
    return flag or bool(os.environ.get("GEAR_TEST_RABBITMQ_IMAGE"))


def find_rabbitmq() -> tuple[RabbitMQ | None, str]:
    """A RabbitMQ for the session (starting a container if need be), or None and why there is none.

    Raises:
        docker.errors.DockerException, TimeoutError: if a Docker engine answers but the container does
            not start: a broken setup is an error, not a skip.
    """
    url = os.environ.get(ENV_URL)
    if url:
        ctl, note = ctl_for_url(url)
        exclusive = bool(os.environ.get(ENV_DISRUPTIVE) or os.environ.get("GEAR_TEST_CLOSE_ALL"))
        return RabbitMQ(url, ctl, exclusive=exclusive, where=f"{ENV_URL} {mask_url(url)}", ctl_note=note), ""
    if not containers_asked():
        return None, (
            f"no RabbitMQ: set {ENV_URL}=amqp://guest:guest@127.0.0.1:5672/ (or {ENV_CONTAINERS}=1 "
            "to start one in Docker)"
        )
    if (why := _docker_answers()) is not None:
        return None, (
            f"no RabbitMQ: set {ENV_URL}=amqp://guest:guest@127.0.0.1:5672/, or make a Docker engine "
            f"answer for testcontainers (scripts/docker_engine.py start); Docker said {why}"
        )
    container = RabbitMQContainer()
    container.start()
    where = f"container {container.name} ({container.image}) at {container.url}"
    note = f"docker exec {container.name} rabbitmqctl"
    found = RabbitMQ(container.url, container.ctl, True, where, container=container, ctl_note=note)
    return found, ""

"""A RabbitMQ container for the tests, started through testcontainers with host networking.

The container shares the host's network (so it works with an engine that has no bridge, as
``scripts/docker_engine.py`` starts one) and keeps to loopback: its AMQP listener, Erlang distribution
port, its own epmd, and the management and Prometheus listeners each get a free port on 127.0.0.1 that
this module picks, under a node name of its own, so it never meets the host's RabbitMQ (5672, epmd 4369,
25672) or any other node. The ports go into a ``conf.d`` file copied into the container before it
starts; that file comes after the images' own defaults and wins over them, in the official
``rabbitmq:4-management`` image as in the local one built by ``scripts/debian_images.py``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from testcontainers.core.config import testcontainers_config
from testcontainers.core.container import DockerContainer
from testcontainers.core.wait_strategies import LogMessageWaitStrategy

__all__ = ("DEFAULT_IMAGE", "ENV_IMAGE", "TEST_LABEL", "RabbitMQContainer")

ENV_IMAGE = "GEAR_TEST_RABBITMQ_IMAGE"
DEFAULT_IMAGE = "rabbitmq:4-management"
TEST_LABEL = "gear.test"
"""Label on every container the tests start (``scripts/docker_engine.py stop`` removes leftovers)."""
READY = r"Server startup complete"
START_TIMEOUT = 180
CONF_FILE = "/etc/rabbitmq/conf.d/90-gear-test.conf"
_LOOPBACK = "127.0.0.1"
_HIGHEST_DIST_PORT = 55000
"""rabbitmqctl listens on the distribution port + 10000 (up to + 10010): keep that a valid port."""


@dataclass(frozen=True, slots=True)
class Ports:
    """The loopback ports one container's node uses."""

    amqp: int
    dist: int
    epmd: int
    management: int
    prometheus: int


@contextlib.contextmanager
def _reserved_ports(count: int) -> Iterator[list[int]]:
    """``count`` distinct free loopback ports (held while the block runs, so none is picked twice)."""
    held: list[socket.socket] = []
    try:
        while len(held) < count:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((_LOOPBACK, 0))
            held.append(sock)
        yield [s.getsockname()[1] for s in held]
    finally:
        for sock in held:
            sock.close()


def pick_ports() -> Ports:
    """Free loopback ports for one node (never 5672/4369/25672: those are in use or below the range)."""
    with _reserved_ports(12) as ports:
        low = [p for p in ports if p < _HIGHEST_DIST_PORT]
        if not low:
            raise RuntimeError(f"no free port below {_HIGHEST_DIST_PORT} for Erlang distribution")
        amqp, epmd, management, prometheus = [p for p in ports if p != low[0]][:4]
        return Ports(amqp=amqp, dist=low[0], epmd=epmd, management=management, prometheus=prometheus)


def config_text(ports: Ports) -> str:
    """The ``conf.d`` file that puts every listener on loopback at the picked ports."""
    return (
        "# Written by Gear's tests (tests/rabbitmq_container.py): loopback only, ports picked by the test.\n"
        f"listeners.tcp.default = {_LOOPBACK}:{ports.amqp}\n"
        f"management.tcp.ip = {_LOOPBACK}\n"
        f"management.tcp.port = {ports.management}\n"
        f"prometheus.tcp.ip = {_LOOPBACK}\n"
        f"prometheus.tcp.port = {ports.prometheus}\n"
    )


def environment(ports: Ports) -> dict[str, str]:
    """RabbitMQ's and Erlang's own variables for a node that keeps off everyone else's ports."""
    loopback_dist = "-kernel inet_dist_use_interface {127,0,0,1}"
    return {
        "RABBITMQ_NODENAME": f"gear-test-{ports.amqp}@localhost",
        "RABBITMQ_NODE_IP_ADDRESS": _LOOPBACK,
        "RABBITMQ_NODE_PORT": str(ports.amqp),
        "RABBITMQ_DIST_PORT": str(ports.dist),
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": loopback_dist,
        "RABBITMQ_CTL_ERL_ARGS": loopback_dist,
        "ERL_EPMD_PORT": str(ports.epmd),
        "ERL_EPMD_ADDRESS": _LOOPBACK,
    }


class RabbitMQContainer:
    """One RabbitMQ node in a container: ``start()``, ``url``, ``ctl([...])``, ``stop()``."""

    def __init__(self, image: str | None = None) -> None:
        self.image = image or os.environ.get(ENV_IMAGE) or DEFAULT_IMAGE
        self.ports = pick_ports()
        self._container: Any = None

    @property
    def url(self) -> str:
        """``amqp://guest:guest@127.0.0.1:PORT/``."""
        return f"amqp://guest:guest@{_LOOPBACK}:{self.ports.amqp}/"

    @property
    def name(self) -> str:
        return f"gear-test-rabbitmq-{self.ports.amqp}"

    def start(self) -> None:
        """Start the container and wait for RabbitMQ's "Server startup complete" log line.

        Raises:
            docker.errors.DockerException: if the engine cannot create or start it (an image that
                cannot be pulled, say).
            TimeoutError: if RabbitMQ does not report startup within ``START_TIMEOUT`` seconds.
        """
        if "TESTCONTAINERS_RYUK_DISABLED" not in os.environ:
            # Ryuk (the reaper) is an image of its own on a bridge network: neither exists on an engine
            # without registry or bridge. This container is removed by stop() and carries TEST_LABEL.
            testcontainers_config.ryuk_disabled = True
        container = (
            DockerContainer(self.image)
            .with_name(self.name)
            .with_envs(**environment(self.ports))
            .with_kwargs(network="host", init=True, labels={TEST_LABEL: "1"})
            .with_copy_into_container(config_text(self.ports).encode(), CONF_FILE)
            .waiting_for(LogMessageWaitStrategy(READY).with_startup_timeout(START_TIMEOUT))
        )
        self._container = container
        try:
            container.start()
        except BaseException:
            self.stop()
            raise

    def ctl(self, args: Sequence[str]) -> str:
        """``rabbitmqctl ARGS`` inside the container (``docker exec``); returns its output.

        Raises:
            RuntimeError: if rabbitmqctl fails (its output is the message).
        """
        return self.exec(["rabbitmqctl", *args])

    def exec(self, command: Sequence[str]) -> str:
        """Run ``command`` inside the container; returns its output.

        Raises:
            RuntimeError: if it fails (its output is the message).
        """
        if self._container is None:
            raise RuntimeError("the RabbitMQ container is not running")
        code, output = self._container.exec(list(command))
        text = output.decode(errors="replace") if isinstance(output, bytes) else str(output)
        if code != 0:
            raise RuntimeError(f"{' '.join(command)} exited with {code}: {text.strip()}")
        return text

    def put_file(self, data: bytes, suffix: str = "") -> str:
        """Copy ``data`` into a new world-readable file in the container; returns its path there."""
        if self._container is None:
            raise RuntimeError("the RabbitMQ container is not running")
        path = f"/tmp/gear-test-{uuid.uuid4().hex[:12]}{suffix}"
        self._container.copy_into_container(data, path, 0o644)
        return path

    def stop(self) -> None:
        """Remove the container (and its volumes); nothing happens if it never started."""
        container, self._container = self._container, None
        if container is not None:
            with contextlib.suppress(Exception):  # already gone: nothing left to remove
                container.stop()

"""The ``cluster`` test backend: a local 3-node RabbitMQ cluster run by ``scripts/rabbitmq-cluster``.

The handle gives tests the three AMQP URLs and node control (``stop_app``, ``start_app``, ``kill -9``,
``restart``, ``rabbitmqctl -n NODE``). Node numbers are 1..3, in URL order. Everything goes through the
script, so tests, benchmarks and people at a shell drive the cluster the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ("SCRIPT", "ClusterError", "ClusterHandle", "find_cluster", "locked")

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "rabbitmq-cluster"
NOT_INSTALLED = 3
START_TIMEOUT = 600.0
CONTROL_TIMEOUT = 120.0


class ClusterError(RuntimeError):
    """The cluster script failed; the message carries its output."""


def run_script(*args: str, timeout: float = CONTROL_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """Run ``scripts/rabbitmq-cluster ARGS`` and return its result (no check)."""
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=os.environ.copy()
    )


def _checked(*args: str, timeout: float = CONTROL_TIMEOUT) -> str:
    done = run_script(*args, timeout=timeout)
    if done.returncode != 0:
        raise ClusterError(f"rabbitmq-cluster {' '.join(args)}: {(done.stderr or done.stdout).strip()}")
    return done.stdout


@dataclass
class ClusterHandle:
    """What a test needs to know and do about the cluster under test."""

    nodes: tuple[str, ...]
    """Erlang node names, e.g. ``gear1@localhost``; ``nodes[n - 1]`` is node ``n``."""
    urls: tuple[str, ...]
    """AMQP URLs, ``urls[n - 1]`` is node ``n``."""
    started_here: bool = False
    """True if this test session started the cluster (and stops it at the end)."""
    disturbed: set[int] = field(default_factory=set)
    """Nodes stopped or killed and not brought back yet (:meth:`heal` restores them)."""

    @property
    def gear_url(self) -> str:
        """All three URLs in ``GEAR_URL`` form (comma-separated)."""
        return ",".join(self.urls)

    def urls_from(self, n: int) -> list[str]:
        """All three URLs, starting at node ``n``: an instance given this list connects to node ``n``
        and fails over to the next ones (places instances one per node)."""
        return [*self.urls[n - 1 :], *self.urls[: n - 1]]

    def number_of(self, node: str) -> int:
        """Node number (1..3) of an Erlang node name."""
        return self.nodes.index(node) + 1

    async def stop_app(self, n: int) -> None:
        """``rabbitmqctl stop_app`` on node ``n``: its connections close, its VM stays up."""
        self.disturbed.add(n)
        await asyncio.to_thread(_checked, "stop-app", str(n))

    async def start_app(self, n: int) -> None:
        """``rabbitmqctl start_app`` on node ``n``, waiting until RabbitMQ runs on it."""
        await asyncio.to_thread(_checked, "start-app", str(n))
        self.disturbed.discard(n)

    async def kill(self, n: int) -> None:
        """``kill -9`` of node ``n``'s Erlang VM."""
        self.disturbed.add(n)
        await asyncio.to_thread(_checked, "kill", str(n))

    async def restart(self, n: int) -> None:
        """Boot a killed node ``n`` again; it rejoins the cluster by itself."""
        await asyncio.to_thread(_checked, "restart", str(n))
        self.disturbed.discard(n)

    async def ctl(self, n: int, *args: str) -> str:
        """``rabbitmqctl -n NODE ARGS`` on node ``n``; its standard output.

        Raises:
            ClusterError: rabbitmqctl failed.
        """
        return await asyncio.to_thread(_checked, "ctl", str(n), *args)

    async def ctl_json(self, n: int, *args: str) -> Any:
        """Like :meth:`ctl` with ``--formatter json``, parsed."""
        return json.loads(await self.ctl(n, *args, "--formatter", "json"))

    async def queue_info(self, n: int, queue: str, *items: str) -> dict[str, Any] | None:
        """``list_queues`` items of one queue as node ``n`` sees it (None if it does not exist)."""
        rows = await self.ctl_json(n, "list_queues", "name", *items)
        return next((row for row in rows if row.get("name") == queue), None)

    async def heal_async(self) -> None:
        """:meth:`heal` from async code."""
        await asyncio.to_thread(self.heal)

    def heal(self) -> None:
        """Bring every disturbed node back and wait until all three run clustered."""
        if self.disturbed:
            _checked("heal", timeout=START_TIMEOUT)
            self.disturbed.clear()


def find_cluster(*, may_start: bool) -> tuple[ClusterHandle | None, str]:
    """The running cluster, else one started now (if ``may_start``), else a reason to skip."""
    try:
        status = run_script("status", "--json", timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"cannot run {SCRIPT.name}: {exc}"
    if status.returncode == NOT_INSTALLED:
        return None, "rabbitmq-server is not installed (Debian: apt-get install rabbitmq-server)"
    started = False
    if status.returncode != 0:
        if not may_start:
            return None, "the RabbitMQ cluster is not running: scripts/rabbitmq-cluster start"
        begun = time.monotonic()
        try:
            start = run_script("start", timeout=START_TIMEOUT)
        except subprocess.TimeoutExpired:
            return None, f"the RabbitMQ cluster did not start within {START_TIMEOUT:g}s"
        if start.returncode != 0:
            # what it did (each step and its time), then why it gave up
            why = "\n".join(part.strip() for part in (start.stdout, start.stderr) if part.strip())
            return None, f"the RabbitMQ cluster could not be started:\n{why}"
        # a `start` already under way (.ci/run boots the cluster while it installs) is waited for,
        # and then the cluster is not ours to stop
        started = "already running" not in start.stdout
        if started:
            print(f"\nstarted the RabbitMQ cluster in {time.monotonic() - begun:.1f}s")
        status = run_script("status", "--json", timeout=60)
    state = json.loads(status.stdout)
    nodes = tuple(entry["node"] for entry in state["nodes"])
    urls = tuple(entry["url"] for entry in state["nodes"])
    return ClusterHandle(nodes=nodes, urls=urls, started_here=started), ""


@contextlib.contextmanager
def locked(wait: float) -> Iterator[bool]:
    """Hold this cluster's test lock (one test session disturbs it at a time); yields False on timeout."""
    name = os.environ.get("GEAR_CLUSTER_NAME", "gear")
    with open(f"/tmp/rabbitmq-cluster-{name}.tests.lock", "a") as handle:
        give_up = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > give_up:
                    yield False
                    return
                time.sleep(1)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

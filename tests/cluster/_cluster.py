"""The ``cluster`` test backends: local 3-node RabbitMQ clusters, 3.10 run by ``scripts/rabbitmq-cluster``
and 4.3 by ``scripts/rabbitmq-cluster43`` (whose nodes can also be cut off and have their disks fail).

The handle gives tests the three AMQP URLs and node control (``stop_app``, ``start_app``, ``kill -9``,
``restart``, ``rabbitmqctl -n NODE``; on 4.3 ``cut``, ``disk``). Node numbers are 1..3, in URL order.
Everything goes through the scripts, so tests, benchmarks and people at a shell drive a cluster the same
way.
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

__all__ = ("SCRIPT", "SCRIPTS", "ClusterError", "ClusterHandle", "find_cluster", "locked")

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "rabbitmq-cluster"
SCRIPTS = {"3.10": SCRIPT, "4.3": SCRIPT.with_name("rabbitmq-cluster43")}
"""The script that runs each release's cluster."""
NOT_INSTALLED = 3
START_TIMEOUT = 600.0
CONTROL_TIMEOUT = 120.0


class ClusterError(RuntimeError):
    """The cluster script failed; the message carries its output."""


def run_script(
    *args: str, timeout: float = CONTROL_TIMEOUT, script: Path = SCRIPT
) -> subprocess.CompletedProcess[str]:
    """Run ``scripts/rabbitmq-cluster ARGS`` (or another cluster ``script``) and return its result."""
    return subprocess.run(
        [str(script), *args], capture_output=True, text=True, timeout=timeout, env=os.environ.copy()
    )


def _checked(*args: str, timeout: float = CONTROL_TIMEOUT, script: Path = SCRIPT) -> str:
    done = run_script(*args, timeout=timeout, script=script)
    if done.returncode != 0:
        raise ClusterError(f"{script.name} {' '.join(args)}: {(done.stderr or done.stdout).strip()}")
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
    """Nodes stopped, killed, cut off or with a failed disk, not brought back yet (:meth:`heal`)."""
    script: Path = SCRIPT
    """The script that runs this cluster."""
    release: str = "3.10"
    """The RabbitMQ release of its nodes."""
    net_ticktime: int = 60
    """Erlang's ``net_ticktime`` on its nodes (a cut-off node is declared down after about 1-1.25 x)."""

    def _run(self, *args: str, timeout: float = CONTROL_TIMEOUT) -> str:
        return _checked(*args, timeout=timeout, script=self.script)

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
        await asyncio.to_thread(self._run, "stop-app", str(n))

    async def start_app(self, n: int) -> None:
        """``rabbitmqctl start_app`` on node ``n``, waiting until RabbitMQ runs on it."""
        await asyncio.to_thread(self._run, "start-app", str(n))
        self.disturbed.discard(n)

    async def kill(self, n: int) -> None:
        """``kill -9`` of node ``n``'s Erlang VM."""
        self.disturbed.add(n)
        await asyncio.to_thread(self._run, "kill", str(n))

    async def restart(self, n: int) -> None:
        """Boot a killed node ``n`` again; it rejoins the cluster by itself."""
        await asyncio.to_thread(self._run, "restart", str(n))
        self.disturbed.discard(n)

    async def ctl(self, n: int, *args: str) -> str:
        """``rabbitmqctl -n NODE ARGS`` on node ``n``; its standard output.

        Raises:
            ClusterError: rabbitmqctl failed.
        """
        return await asyncio.to_thread(self._run, "ctl", str(n), *args)

    async def ctl_json(self, n: int, *args: str) -> Any:
        """Like :meth:`ctl` with ``--formatter json``, parsed."""
        return json.loads(await self.ctl(n, *args, "--formatter", "json"))

    async def queue_info(self, n: int, queue: str, *items: str) -> dict[str, Any] | None:
        """``list_queues`` items of one queue as node ``n`` sees it (None if it does not exist)."""
        rows = await self.ctl_json(n, "list_queues", "name", *items)
        return next((row for row in rows if row.get("name") == queue), None)

    async def cut(self, n: int) -> None:
        """Drop every packet to and from node ``n`` (4.3 cluster): a partition of one node."""
        self.disturbed.add(n)
        await asyncio.to_thread(self._run, "cut", str(n))

    async def uncut(self) -> None:
        """Remove the packet filter rules of :meth:`cut`: the partition heals."""
        await asyncio.to_thread(self._run, "uncut")

    async def disk(self, n: int, fault: str) -> None:
        """Fail node ``n``'s data disk (4.3 cluster): ``error``, ``eio`` or ``full``."""
        self.disturbed.add(n)
        await asyncio.to_thread(self._run, "disk", str(n), fault)

    async def leader(self, queue: str, asked: int = 0) -> int | None:
        """The node (1..3) that holds the quorum leader of ``queue``, asking node ``asked`` (or the
        first that answers)."""
        for n in [asked] if asked else [1, 2, 3]:
            with contextlib.suppress(ClusterError, ValueError):
                info = await self.queue_info(n, queue, "leader")
                if info is not None and info.get("leader") in self.nodes:
                    return self.number_of(info["leader"])
        return None

    async def heal_async(self) -> None:
        """:meth:`heal` from async code."""
        await asyncio.to_thread(self.heal)

    def heal(self) -> None:
        """Bring every disturbed node back and wait until all three run clustered."""
        if self.disturbed:
            self._run("heal", timeout=START_TIMEOUT)
            self.disturbed.clear()


def find_cluster(*, may_start: bool, release: str = "3.10") -> tuple[ClusterHandle | None, str]:
    """The running cluster of ``release``, else one started now (if ``may_start``), else a reason to skip."""
    script = SCRIPTS[release]
    try:
        status = run_script("status", "--json", timeout=60, script=script)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"cannot run {SCRIPT.name}: {exc}"
    if status.returncode == NOT_INSTALLED:
        return None, "rabbitmq-server is not installed (Debian: apt-get install rabbitmq-server)"
    started = False
    if status.returncode != 0:
        if not may_start:
            return None, f"the RabbitMQ {release} cluster is not running: scripts/{script.name} start"
        begun = time.monotonic()
        try:
            start = run_script("start", timeout=START_TIMEOUT, script=script)
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
            print(f"\nstarted the RabbitMQ {release} cluster in {time.monotonic() - begun:.1f}s")
        status = run_script("status", "--json", timeout=60, script=script)
    state = json.loads(status.stdout)
    nodes = tuple(entry["node"] for entry in state["nodes"])
    urls = tuple(entry["url"] for entry in state["nodes"])
    handle = ClusterHandle(nodes=nodes, urls=urls, started_here=started, script=script, release=release)
    handle.net_ticktime = int(state.get("net_ticktime", 60))
    return handle, ""


@contextlib.contextmanager
def locked(wait: float, release: str = "3.10") -> Iterator[bool]:
    """Hold this cluster's test lock (one test session disturbs it at a time); yields False on timeout."""
    if release == "3.10":
        name = os.environ.get("GEAR_CLUSTER_NAME", "gear")
    else:
        name = os.environ.get("GEAR_CLUSTER43_NAME", "g43")
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

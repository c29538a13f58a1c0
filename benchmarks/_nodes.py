"""Node control of the local RabbitMQ cluster for the cluster benchmarks (``scripts/rabbitmq-cluster``)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

__all__ = ("SCRIPT", "Nodes")

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "rabbitmq-cluster"


def _run(*args: str, timeout: float = 180.0) -> str:
    done = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"rabbitmq-cluster {' '.join(args)}: {(done.stderr or done.stdout).strip()}")
    return done.stdout


class Nodes:
    """The three nodes of the running cluster: URLs, names and control (numbers 1..3)."""

    def __init__(self) -> None:
        done = subprocess.run([str(SCRIPT), "status", "--json"], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise SystemExit("the cluster is not running (or not whole): scripts/rabbitmq-cluster start")
        state = json.loads(done.stdout)
        self.names: tuple[str, ...] = tuple(n["node"] for n in state["nodes"])
        self.urls: tuple[str, ...] = tuple(n["url"] for n in state["nodes"])

    def number_of(self, node: str) -> int:
        return self.names.index(node) + 1

    async def lose(self, n: int, how: str) -> None:
        """Lose node ``n``: ``stop_app`` or ``kill`` (-9 of its VM)."""
        await asyncio.to_thread(_run, "stop-app" if how == "stop_app" else "kill", str(n))

    async def bring_back(self, n: int, how: str) -> None:
        """Undo :meth:`lose` (``start_app``, or boot the killed VM again)."""
        await asyncio.to_thread(_run, "start-app" if how == "stop_app" else "restart", str(n))

    async def heal(self) -> None:
        await asyncio.to_thread(_run, "heal", timeout=300)

    async def ctl(self, n: int, *args: str) -> str:
        return await asyncio.to_thread(_run, "ctl", str(n), *args)

    async def queues(self, n: int, prefix: str) -> list[dict[str, Any]]:
        """``list_queues`` on node ``n`` for queues whose name starts with ``prefix``; ``node`` is where
        the queue (classic) or its leader (quorum) lives."""
        out = await self.ctl(
            n,
            "list_queues",
            "-q",
            "--no-table-headers",
            "name",
            "type",
            "pid",
            "leader",
            "messages",
            "consumers",
            "state",
        )
        rows = []
        for line in out.splitlines():
            name, type_, pid, leader, messages, consumers, state = (line.split("\t") + [""] * 7)[:7]
            if not name.startswith(prefix):
                continue
            node = leader or pid.strip("<>").split(".")[0]
            rows.append(
                {
                    "name": name,
                    "type": type_,
                    "node": node,
                    "messages": messages,
                    "consumers": consumers,
                    "state": state,
                }
            )
        return rows

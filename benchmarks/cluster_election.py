"""How long a quorum queue whose leader was on a node that is cut off accepts nothing: from the cut to
the first publish to it that is confirmed through another node.

Needs the 4.3 cluster (``scripts/rabbitmq-cluster43 start``, as root); run it once with the cluster
started as RabbitMQ configures it and once with ``GEAR_CLUSTER_DETECTOR_MS=1000`` (the poll interval
of the quorum queues' failure detector, ``raft.adaptive_failure_detector.poll_interval``: 5000 ms by
default). Each run declares a quorum queue on node 1 (its leader there), cuts node 1 off, publishes
through node 2 every half second until one is confirmed, then heals the cluster.

Usage::

    python benchmarks/cluster_election.py --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import subprocess
import time
from pathlib import Path

import aiormq

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "scripts" / "rabbitmq-cluster43")
TRY_EVERY = 0.5
"""Seconds a publish waits for its confirm before the next one goes (the figures' resolution)."""


def _cluster(*args: str) -> str:
    return subprocess.run([SCRIPT, *args], check=True, capture_output=True, text=True).stdout


async def one_run(urls: list[str]) -> float:
    """Seconds from the cut to the first confirmed publish to a queue led by the cut-off node."""
    name = f"gear-election-{time.time_ns()}"
    first = await aiormq.connect(urls[0])
    channel = await first.channel()
    await channel.queue_declare(name, durable=True, arguments={"x-queue-type": "quorum"})
    await first.close()
    other = await aiormq.connect(urls[1])
    try:
        channel = await other.channel()
        await channel.confirm_delivery()
        await channel.basic_publish(b"before", routing_key=name)
        _cluster("cut", "1")
        cut = time.monotonic()
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(channel.basic_publish(b"after", routing_key=name), TRY_EVERY)
                    return time.monotonic() - cut
        finally:
            _cluster("heal")
            with contextlib.suppress(Exception):
                await asyncio.wait_for(channel.queue_delete(name), 30)
    finally:
        await other.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    urls = _cluster("urls").split()
    setting = _cluster("ctl", "1", "eval", "application:get_env(aten, poll_interval).").strip()
    poll = setting.removeprefix("{ok,").removesuffix("}") + " ms" if setting.startswith("{ok,") else setting
    took = []
    for _ in range(args.runs):
        took.append(await one_run(urls))
        await asyncio.sleep(5)  # the healed node rejoins
    shown = ", ".join(f"{t:.2f}" for t in took)
    print(
        f"failure detector poll interval {poll}: first confirm {shown} s after the cut "
        f"(median {statistics.median(took):.2f} s, resolution {TRY_EVERY} s)"
    )


if __name__ == "__main__":
    asyncio.run(main())

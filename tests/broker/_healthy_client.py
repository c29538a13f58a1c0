"""A well-behaved client for the hostile-client suite, in its own process so the suite's own work
cannot slow it down: ``python -m tests.broker._healthy_client URL``.

It declares the exclusive queue ``healthy`` (others may publish to it), consumes it (acking each
delivery) and publishes one message every few milliseconds with publisher confirms, each carrying its
number in ``message_id``. It prints ``ready``; on a line on stdin it stops and prints one JSON line:
the numbers confirmed, the numbers delivered (repeats included), the longest publish-to-delivery
round trip (ms), the five slowest with when they started (``time.time()``) and how many round trips
there were.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time

import aiormq
from pamqp import commands

__all__ = ("main",)

INTERVAL = 0.005


async def run(url: str) -> dict[str, object]:
    connection = await aiormq.connect(url)
    channel = await connection.channel(publisher_confirms=True)
    await channel.queue_declare("healthy", exclusive=True)
    queue = "healthy"
    sent: dict[str, float] = {}
    delivered: list[int] = []
    trips: list[tuple[float, float]] = []  # (seconds, when it was published: time.time())
    drained = asyncio.Event()

    async def on_message(message: aiormq.abc.DeliveredMessage) -> None:
        number = message.header.properties.message_id or ""
        started = sent.pop(number, None)
        if started is not None:
            took = time.perf_counter() - started
            trips.append((took, time.time() - took))
        if number.isdigit():
            delivered.append(int(number))
        if not sent:
            drained.set()
        await channel.basic_ack(message.delivery_tag or 0)

    await channel.basic_consume(queue, on_message)
    print("ready", flush=True)
    stop = asyncio.ensure_future(asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline))
    confirmed: list[int] = []
    number = 0
    while not stop.done():
        number += 1
        sent[str(number)] = time.perf_counter()
        confirmation = await channel.basic_publish(
            b"healthy", routing_key=queue, properties=commands.Basic.Properties(message_id=str(number))
        )
        if isinstance(confirmation, commands.Basic.Ack):
            confirmed.append(number)
        await asyncio.sleep(INTERVAL)
    if sent:  # the last deliveries
        drained.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(drained.wait(), 10)
    await connection.close()
    slowest = sorted(trips, reverse=True)[:5]
    return {
        "confirmed": confirmed,
        "delivered": delivered,
        "longest_ms": slowest[0][0] * 1000 if slowest else 0.0,
        "slowest": [(round(took * 1000, 1), at) for took, at in slowest],
        "trips": len(trips),
    }


def main() -> None:
    """Run against the URL in argv[1]."""
    print(json.dumps(asyncio.run(run(sys.argv[1]))), flush=True)


if __name__ == "__main__":
    main()

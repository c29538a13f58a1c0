"""Benchmark: what the serving side's per-request bookkeeping costs, without sockets, same run.

    python benchmarks/dispatch.py [--requests 30000] [--rounds 7]

Feeds ready-made call deliveries (100 B JSON, a 30 s deadline, 256 in flight) straight into the
router and dispatcher of one service and serves them with an async echo handler; the reply's publish
is a no-op.
Each round measures the process CPU time per request with the defaults (duplicate window on, the
handler cancelled at its deadline) and with both off (``dedupe=False, cancel_at_deadline=False``);
rounds alternate so that machine noise hits both sides alike. Prints the median of each side and the
difference in microseconds. This is the part of a call's cost that the deadline and duplicate
bookkeeping can add to; a whole call (``benchmarks/rpc.py``, client and server) costs some hundreds of
microseconds of CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gear.amqp import Delivery
from gear.base.envelope import DEADLINE, METHOD, Meta
from gear.serving.dispatch import Dispatcher
from gear.serving.inbound import ReplyHandlers, Router
from gear.session.publisher import Outgoing
from gear.tracing.api import NullTracer
from gear.tracing.emitter import Emitter
from gear.wire.properties import Properties

__all__ = ("main",)


class _Settled:
    def ack(self, delivery_tag: int) -> bool:
        return True

    def reject(self, delivery_tag: int, requeue: bool) -> bool:
        return True


class _Publisher:
    async def publish(self, msg: Outgoing, until: float, **_: Any) -> bool:
        return True


class _NoCalls:
    def take_reply(self, meta: Meta, body: bytes) -> bool:
        return False

    def take_notice(self, meta: Meta) -> None:
        return None


async def _round(requests: int, bookkeeping: bool) -> float:
    """CPU microseconds per request served."""
    dispatcher = Dispatcher(
        identity="BENCH.s1",
        publisher=_Publisher(),  # type: ignore[arg-type]  # a stand-in: Dispatcher only calls publish()
        executor=lambda: ThreadPoolExecutor(1),
    )

    async def echo(payload: dict[str, Any]) -> dict[str, Any]:
        return payload

    dispatcher.register("echo", echo, dedupe=bookkeeping, cancel_at_deadline=bookkeeping)
    router = Router(
        calls=_NoCalls(),
        replies=ReplyHandlers(lambda: ThreadPoolExecutor(1)),
        server=dispatcher,
        events=Emitter(NullTracer(), "BENCH.s1"),
    )
    body = b'{"data": "' + b"x" * 80 + b'"}'
    deadline = int((time.time() + 30) * 1000)
    settled = _Settled()
    deliveries = [
        Delivery(
            1,
            "BENCH.s1",
            "ctag",
            i,
            False,
            "gear",
            "BENCH.s1",
            Properties(
                message_id=f"{i:016x}.1",
                correlation_id=f"{i:016x}",
                reply_to="CLI.c1",
                message_type="gear.call",
                app_id="CLI.c1",
                headers={METHOD: "echo", DEADLINE: deadline},
            ),
            body,
        )
        for i in range(requests)
    ]
    started = time.process_time()
    for first in range(0, requests, 256):
        for delivery in deliveries[first : first + 256]:
            router.on_delivery(delivery, settled)
        await dispatcher.drain(30.0)
    return (time.process_time() - started) / requests * 1e6


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    on: list[float] = []
    off: list[float] = []
    for _ in range(args.rounds):
        on.append(asyncio.run(_round(args.requests, True)))
        off.append(asyncio.run(_round(args.requests, False)))
    print(
        f"dispatch path, CPU us per request, median of {args.rounds} alternating rounds "
        f"({args.requests} requests, 256 in flight):"
    )
    print(f"  defaults (duplicate window, cancel at deadline): {statistics.median(on):6.2f} {_rounded(on)}")
    print(f"  both off: {statistics.median(off):45.2f} {_rounded(off)}")
    print(f"  bookkeeping: +{statistics.median(on) - statistics.median(off):.2f} us per request")


def _rounded(values: list[float]) -> list[float]:
    return [round(v, 2) for v in sorted(values)]


if __name__ == "__main__":
    main()

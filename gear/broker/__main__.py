"""``python -m gear.broker --port N [--memory-high-watermark X] [--data-dir DIR] [--consumer-timeout MS]``:
run the broker."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from collections.abc import Coroutine
from typing import Any

from gear.base.redact import mask_url
from gear.broker.node.config import BrokerConfig
from gear.broker.shell.server import serve
from gear.eventloop import run

__all__ = ("main",)


def _watermark(text: str) -> float | int:
    return float(text) if "." in text else int(text)


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m gear.broker", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5672)
    parser.add_argument(
        "--memory-high-watermark",
        type=_watermark,
        default=0.4,
        help="a fraction of RAM (0.4) or bytes (100000000)",
    )
    parser.add_argument("--max-connections", type=int, default=None)
    parser.add_argument("--data-dir", default=None, help="keep durable state here (default: memory only)")
    parser.add_argument(
        "--consumer-timeout",
        type=int,
        default=1_800_000,
        help="ms a delivery may stay unacknowledged before its channel is closed (0: no limit; 30 min)",
    )
    parser.add_argument(
        "--management-port", type=int, default=None, help="serve a read-only management HTTP API here"
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    config = BrokerConfig(
        host=args.host,
        port=args.port,
        memory_high_watermark=args.memory_high_watermark,
        max_connections=args.max_connections,
        data_dir=args.data_dir,
        consumer_timeout=args.consumer_timeout or None,
        management_port=args.management_port,
    )
    with contextlib.suppress(KeyboardInterrupt):
        run(
            _until_sigterm(
                serve(
                    config,
                    on_ready=lambda url: print(f"gear broker ready at {mask_url(url)}", flush=True),
                    on_recovered=lambda report: print(f"gear broker: {report.summary()}", flush=True),
                )
            )
        )


async def _until_sigterm(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main``; SIGTERM cancels it, so the broker stops cleanly (its data directory closed)."""
    task = asyncio.ensure_future(main)
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await task


if __name__ == "__main__":
    main()

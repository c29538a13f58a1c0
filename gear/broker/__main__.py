"""``python -m gear.broker --port N [--memory-high-watermark X]``: run the reference broker."""

from __future__ import annotations

import argparse
import contextlib
import logging

from gear.broker.config import BrokerConfig
from gear.broker.server import serve
from gear.eventloop import run
from gear.redact import mask_url

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
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    config = BrokerConfig(
        host=args.host,
        port=args.port,
        memory_high_watermark=args.memory_high_watermark,
        max_connections=args.max_connections,
    )
    with contextlib.suppress(KeyboardInterrupt):
        run(serve(config, on_ready=lambda url: print(f"gear broker ready at {mask_url(url)}", flush=True)))


if __name__ == "__main__":
    main()

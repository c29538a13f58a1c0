"""Steady load for minutes, on both brokers: calls, links lost, latency and memory, minute by minute.

The same job as ``tests/soak`` (a caller process keeping 1, 16 and 256 calls in flight against a
server process, three pairs at once), for ``--minutes`` (default 10) per broker::

    python benchmarks/soak.py --minutes 10 [--url amqp://...] [--brokers reference,rabbitmq]

Prints one table per broker and concurrency, one row a minute: calls, failed calls, links lost by the
caller and reconnects of the server (both since the start), p50/p99 latency, and both processes'
resident memory; then a summary row per broker for the docs (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from gear.testing.soak import Interval, soak

__all__ = ("main",)

RABBITMQ = os.environ.get("GEAR_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
_READY = re.compile(r"gear broker ready at amqp://[^@]+@127\.0\.0\.1:(\d+)/")


@contextmanager
def reference_broker() -> Iterator[str]:
    """Gear's reference broker in a process of its own; yields its URL."""
    broker = subprocess.Popen(
        [sys.executable, "-m", "gear.broker", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    assert broker.stdout is not None
    found = _READY.search(broker.stdout.readline())
    try:
        if found is None:
            raise SystemExit("the reference broker did not start")
        yield f"amqp://guest:guest@127.0.0.1:{found.group(1)}/"
    finally:
        broker.terminate()
        broker.wait(10)


def _table(kind: str, concurrency: int, rows: list[Interval]) -> str:
    lines = [
        f"{kind}, {concurrency} in flight",
        "| minute | calls | failed | caller links lost | server reconnects | p50 ms | p99 ms "
        "| caller MiB | server MiB | server's duplicate window |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row.index} | {row.calls:,} | {sum(row.failed.values())} | {row.caller_links_lost} | "
            f"{row.server_reconnects} | {row.p50_ms} | {row.p99_ms} | {row.caller_rss_mib:.1f} | "
            f"{row.server_rss_mib:.1f} | {'-' if row.server_window is None else f'{row.server_window:,}'} |"
        )
    return "\n".join(lines)


def _summary(kind: str, minutes: float, runs: dict[int, list[Interval]]) -> str:
    calls = sum(r.calls for rows in runs.values() for r in rows)
    failed = sum(sum(r.failed.values()) for rows in runs.values() for r in rows)
    lost = sum(rows[-1].caller_links_lost for rows in runs.values())
    reconnects = sum(rows[-1].server_reconnects or 0 for rows in runs.values())
    growth = max((rows[-1].server_rss_mib or 0) - (rows[0].server_rss_mib or 0) for rows in runs.values())
    return (
        f"| {kind} | {minutes:g} min at {', '.join(map(str, runs))} in flight | {calls:,} | {failed} | "
        f"{lost + reconnects} | {growth:+.1f} MiB |"
    )


def run(kind: str, url: str, minutes: float, concurrency: list[int]) -> str:
    """Soak one broker; its tables and its summary row."""
    with ThreadPoolExecutor(len(concurrency)) as pool:
        futures = {
            c: pool.submit(soak, url, concurrency=c, seconds=minutes * 60, interval=60) for c in concurrency
        }
        runs = {c: f.result() for c, f in futures.items()}
    tables = "\n\n".join(_table(kind, c, rows) for c, rows in runs.items())
    return tables + "\n\n" + _summary(kind, minutes, runs)


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--url", default=RABBITMQ, help="the RabbitMQ to soak")
    parser.add_argument("--brokers", default="reference,rabbitmq")
    parser.add_argument("--concurrency", default="1,16,256")
    args = parser.parse_args()
    concurrency = [int(c) for c in args.concurrency.split(",")]
    summaries = []
    for kind in args.brokers.split(","):
        if kind == "reference":
            with reference_broker() as url:
                out = run(kind, url, args.minutes, concurrency)
        else:
            out = run(kind, args.url, args.minutes, concurrency)
        print(out.rpartition("\n\n")[0] + "\n", flush=True)
        summaries.append(out.rpartition("\n\n")[2])
    print("| broker | load | calls | failed | links lost | server memory, first to last minute |")
    print("|---|---|---:|---:|---:|---:|")
    print("\n".join(summaries))


if __name__ == "__main__":
    main()

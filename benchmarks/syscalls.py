"""Benchmark: the system calls one call costs, one call in flight: Gear against the same job in Go.

    python benchmarks/syscalls.py [--url amqp://guest:guest@127.0.0.1:5672/] [--calls 3000]

Each side (caller and server, each its own process) runs under ``strace -f -c``. Every process is run
twice, with a short and a long stretch of calls, and the difference of the two counts is divided by
the difference of the calls made, so starting and stopping (imports, the handshake, declarations)
cancel out and what is left is the cost of one call. Gear runs with its defaults (confirms and
``mandatory`` on requests and replies, acked deliveries) on the default asyncio loop, where each
``epoll_wait`` is one turn of the event loop; Go is ``benchmarks/go/rpcbench.go`` (built by
``gobench.py``; skipped, with the reason, where Go is missing). strace slows every system call down,
so this measures counts, not time (``rpc.py`` has the time).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import gobench
from _cleanup import delete_queues
from rpc import PAYLOAD

__all__ = ("main",)

HERE = Path(__file__).resolve()
Run = tuple[Counter[str], Counter[str], int]
"""A run's system calls in the caller, in the server, and the calls it made."""
_ROW = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$")


def _counts(path: Path) -> Counter[str]:
    """System call name -> calls, from an ``strace -c`` summary."""
    counts: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        found = _ROW.match(line)
        if found and found.group(2) != "total":
            counts[found.group(2)] += int(found.group(1))
    return counts


def _traced(command: list[str], out: Path) -> list[str]:
    return ["strace", "-f", "-c", "-o", str(out), *command]


def _start(command: list[str], out: Path, what: str) -> subprocess.Popen[str]:
    """Start ``command`` under strace (summary to ``out``) and wait for its ``ready`` line.

    Raises:
        RuntimeError: it did not say ``ready``.
    """
    process = subprocess.Popen(
        _traced(command, out), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    if process.stdout.readline().strip() != "ready":
        process.kill()
        raise RuntimeError(f"the {what} did not start")
    return process


def _stop(process: subprocess.Popen[str]) -> None:
    """Close its stdin (the servers and Go's client exit then) and wait for strace's summary."""
    assert process.stdin is not None
    process.stdin.close()
    process.wait(timeout=60)


# -- Gear's processes ---------------------------------------------------------------------------------


async def _gear_client(url: str, tag: str, calls: int) -> None:
    import gear

    svc = gear.Service.client(url=url)
    async with svc:
        for _ in range(calls):
            await svc.rpc.call(f"BENCH{tag}.s1", "echo", PAYLOAD)  # rpc.py's server
    print(calls, flush=True)


def _run_gear(url: str, calls: int, folder: Path) -> Run:
    tag = uuid.uuid4().hex[:8]
    me = [sys.executable, str(HERE), "--url", url, "--tag", tag]
    serve = [sys.executable, str(HERE.with_name("rpc.py")), "--serve", "gear", "--url", url, "--tag", tag]
    server = _start(serve, folder / "server", "Gear server")
    try:
        done = subprocess.run(
            _traced([*me, "--client-gear", str(calls)], folder / "client"),
            capture_output=True, text=True, check=True, timeout=600,
        )  # fmt: skip
    finally:
        _stop(server)
    asyncio.run(delete_queues(url, [f"BENCH{tag}", f"BENCH{tag}.s1"]))
    return _counts(folder / "client"), _counts(folder / "server"), int(done.stdout.split()[-1])


# -- Go's processes -----------------------------------------------------------------------------------


def _run_go(binary: Path, url: str, seconds: float, folder: Path) -> Run:
    tag = uuid.uuid4().hex[:8]
    server = _start(gobench.server_command(binary, url, tag), folder / "server", "Go server")
    try:
        command = [str(binary), "client", url, gobench.EXCHANGE, f"GO{tag}.s1"]
        client = _start(command, folder / "client", "Go client")
        assert client.stdin is not None
        assert client.stdout is not None
        client.stdin.write(f"load 1 {round(seconds * 1000)}\n")
        client.stdin.flush()
        made = int(json.loads(client.stdout.readline())["in_time"])
        _stop(client)
    finally:
        _stop(server)
    return _counts(folder / "client"), _counts(folder / "server"), made


# -- the table ----------------------------------------------------------------------------------------


def _per_call(short: Run, long: Run) -> tuple[dict[str, float], dict[str, float], int]:
    calls = long[2] - short[2]
    if calls <= 0:
        raise RuntimeError("the long run made no more calls than the short one")

    def difference(few: Counter[str], many: Counter[str]) -> dict[str, float]:
        return {name: max(0.0, (many[name] - few[name]) / calls) for name in set(few) | set(many)}

    return difference(short[0], long[0]), difference(short[1], long[1]), calls


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("GEAR_URL", "amqp://guest:guest@127.0.0.1:5672/"))
    parser.add_argument(
        "--calls", type=int, default=3000, help="Gear's long stretch (its short one is a tenth)"
    )
    parser.add_argument("--tag", default="", help=argparse.SUPPRESS)
    parser.add_argument("--client-gear", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client_gear is not None:
        asyncio.run(_gear_client(args.url, args.tag, args.client_gear))
        return

    columns: dict[str, tuple[dict[str, float], dict[str, float], int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folders = [Path(tmp, name) for name in ("a", "b")]
        for folder in folders:
            folder.mkdir()
        short = _run_gear(args.url, args.calls // 10, folders[0])
        started = time.monotonic()
        long = _run_gear(args.url, args.calls, folders[1])
        # Go gets as long as Gear's long run took, and a tenth of it for its short one
        span = max(1.0, time.monotonic() - started)
        columns["gear"] = _per_call(short, long)
        binary, why = gobench.build()
        if binary is None:
            print(f"go amqp091: skipped ({why})")
        else:
            short = _run_go(binary, args.url, span / 10, folders[0])
            long = _run_go(binary, args.url, span, folders[1])
            columns["go amqp091"] = _per_call(short, long)

    names = sorted(
        {n for caller, server, _ in columns.values() for n in (*caller, *server)},
        key=lambda n: -sum(c.get(n, 0) + s.get(n, 0) for c, s, _ in columns.values()),
    )
    shown = [n for n in names if any(c.get(n, 0) + s.get(n, 0) >= 0.05 for c, s, _ in columns.values())]
    print(
        "System calls per call, one call in flight, caller and server each in a process of its own "
        "(strace -f -c; the difference of a short and a long run, per call made in between)"
    )
    print()
    heads = [f"{peer} {side}" for peer in columns for side in ("caller", "server")]
    print("| system call | " + " | ".join(heads) + " |")
    print("|---|" + "---:|" * len(heads))
    for name in shown:
        cells = [f"{side.get(name, 0):.2f}" for c, s, _ in columns.values() for side in (c, s)]
        print(f"| {name} | " + " | ".join(cells) + " |")
    totals = [f"**{sum(side.values()):.1f}**" for c, s, _ in columns.values() for side in (c, s)]
    print("| **all** | " + " | ".join(totals) + " |")
    print()
    print("calls measured: " + ", ".join(f"{peer} {calls:,}" for peer, (_, _, calls) in columns.items()))


if __name__ == "__main__":
    main()

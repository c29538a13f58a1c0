"""Steady traffic for minutes: a caller and a server in processes of their own, counted per interval.

Short, polite test scenarios hide what production finds after a few minutes (a watchdog that fires on
a healthy link, memory that creeps). A soak runs one Gear server process and one caller process that
keeps ``concurrency`` calls in flight against it for ``seconds``, and reports every ``interval``
seconds: calls that succeeded, calls that failed (by error type), the latency p50/p99, how often each
side lost its link, and both processes' resident memory::

    python -m gear.testing.soak --url amqp://guest:guest@127.0.0.1:5672/ --concurrency 16 --seconds 600

prints one JSON object per interval (:class:`Interval`), then ``{"done": true}``. :func:`soak` runs the
two processes from Python and returns the intervals; the soak tests and ``benchmarks/soak.py`` use it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from gear.link.admin import delete_queues

__all__ = ("Interval", "SoakError", "resident_mib", "soak")

_PAYLOAD = {"data": "x" * 80}
_READY = "soak server ready"
_PING = "gear.ping"


class SoakError(RuntimeError):
    """A soak process failed to start or died; the message has its output."""


@dataclass
class Interval:
    """What one interval of a soak saw."""

    index: int
    seconds: float
    calls: int
    failed: dict[str, int] = field(default_factory=dict)
    p50_ms: float | None = None
    p99_ms: float | None = None
    caller_links_lost: int = 0
    """Links the caller lost since the start (cumulative)."""
    server_reconnects: int | None = None
    """Reconnects the server made since the start (cumulative; from its ``gear.ping``)."""
    caller_rss_mib: float | None = None
    server_rss_mib: float | None = None
    server_window: int | None = None
    """Request ids the server's duplicate window holds (each until its call's deadline: a window
    grows with the call rate up to its bound, and the server's memory with it)."""


def resident_mib(pid: int) -> float | None:
    """The resident memory of process ``pid`` in MiB (Linux ``/proc``), or None where unknown."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


# -- the two processes ------------------------------------------------------------------------------


async def _serve(url: str, type_: str) -> None:
    import gear

    svc = gear.Service(type_, "server", url=url, prefetch=512)

    @svc.handler("echo")
    async def echo(payload: dict[str, Any]) -> dict[str, Any]:
        return payload

    async with svc:
        print(_READY, flush=True)
        await asyncio.Event().wait()


async def _call(url: str, type_: str, concurrency: int, seconds: float, interval: float) -> None:
    import gear

    lost = 0

    def on_lost(_reason: str) -> None:
        nonlocal lost
        lost += 1

    client = gear.Service.client("SOAKC", url=url)
    client.on_lost = on_lost
    address = f"{type_}.server"
    latencies: list[float] = []
    failed: Counter[str] = Counter()
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds

    async def worker() -> None:
        while loop.time() < end:
            started = time.perf_counter()  # not the loop's clock: uvloop's ticks in whole milliseconds
            try:
                await client.rpc.call(address, "echo", _PAYLOAD)
            except gear.GearError as exc:
                failed[type(exc).__name__] += 1
                await asyncio.sleep(0.01)  # a failure must not turn into a busy loop
                continue
            latencies.append(time.perf_counter() - started)

    async with client:
        ping = await client.rpc.call(address, _PING, timeout=10)
        server_pid = int(ping["pid"])
        workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
        index = 0
        started = loop.time()
        while loop.time() < end:
            await asyncio.sleep(min(interval, max(0.0, end - loop.time())))
            index += 1
            done, latencies = latencies, []
            gone, failed = dict(failed), Counter()
            try:
                server = await client.rpc.call(address, _PING, timeout=5)
                reconnects: int | None = int(server["reconnects"])
                window: int | None = int(server["duplicate_window"])
            except gear.GearError:
                reconnects = window = None
            row = Interval(
                index=index,
                seconds=round(loop.time() - started, 3),
                calls=len(done),
                failed=gone,
                p50_ms=_percentile(done, 0.50),
                p99_ms=_percentile(done, 0.99),
                caller_links_lost=lost,
                server_reconnects=reconnects,
                caller_rss_mib=resident_mib(os.getpid()),
                server_rss_mib=resident_mib(server_pid),
                server_window=window,
            )
            print(json.dumps(asdict(row)), flush=True)
        await asyncio.gather(*workers)
    print(json.dumps({"done": True}), flush=True)


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0] * 1000, 3)
    return round(statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1] * 1000, 3)


# -- the driver -------------------------------------------------------------------------------------


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gear.testing.soak", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def soak(
    url: str,
    *,
    concurrency: int,
    seconds: float,
    interval: float = 10.0,
    type_: str | None = None,
    loop: str = "asyncio",
) -> list[Interval]:
    """Run a server process and a caller process for ``seconds``; the caller's intervals.

    Raises:
        SoakError: a process did not start within 30 s, died, or printed something unexpected.
    """
    type_ = type_ or f"SOAK{os.getpid()}{os.urandom(2).hex().upper()}"
    common = ("--url", url, "--type", type_, "--loop", loop)
    server = _spawn("serve", *common)
    try:
        return _run(server, common, concurrency, seconds, interval)
    finally:
        server.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(10)
        if server.poll() is None:
            server.kill()
        asyncio.run(delete_queues(url, [type_, f"{type_}.server"]))


def _run(
    server: subprocess.Popen[str], common: tuple[str, ...], concurrency: int, seconds: float, interval: float
) -> list[Interval]:
    """Wait for the server, run the caller to its end, parse its intervals."""
    _wait_ready(server)
    caller = _spawn(
        "call", *common, "--concurrency", str(concurrency), "--seconds", str(seconds),
        "--interval", str(interval),
    )  # fmt: skip
    try:
        out, _ = caller.communicate(timeout=seconds + 120)
    except subprocess.TimeoutExpired:
        caller.kill()
        out, _ = caller.communicate()
        raise SoakError(f"the caller did not finish in time:\n{out[-4000:]}") from None
    rows = [line for line in out.splitlines() if line.startswith("{")]
    if caller.returncode != 0 or not rows or json.loads(rows[-1]) != {"done": True}:
        raise SoakError(f"the caller failed (exit {caller.returncode}):\n{out[-4000:]}")
    return [Interval(**json.loads(line)) for line in rows[:-1]]


def _wait_ready(server: subprocess.Popen[str]) -> None:
    assert server.stdout is not None
    deadline = time.monotonic() + 30
    seen: list[str] = []
    while time.monotonic() < deadline:
        line = server.stdout.readline()
        if not line:
            break
        if line.strip() == _READY:
            return
        seen.append(line)
    server.kill()
    raise SoakError("the soak server did not start:\n" + "".join(seen)[-4000:])


def main(argv: list[str] | None = None) -> None:
    """Entry point of the two processes (``serve`` and ``call``)."""
    parser = argparse.ArgumentParser(prog="python -m gear.testing.soak", description=__doc__)
    parser.add_argument("role", choices=("serve", "call"))
    parser.add_argument("--url", required=True)
    parser.add_argument("--type", default="SOAK")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    args = parser.parse_args(argv)
    if args.loop == "uvloop":
        import uvloop

        runner: Any = uvloop.run
    else:
        runner = asyncio.run
    if args.role == "serve":
        with contextlib.suppress(KeyboardInterrupt):
            runner(_serve(args.url, args.type))
    else:
        runner(_call(args.url, args.type, args.concurrency, args.seconds, args.interval))


if __name__ == "__main__":
    main()

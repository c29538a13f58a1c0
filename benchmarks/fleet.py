"""Fleets of thousands: what a call costs with N instances of one TYPE, and how the fleet comes back when
the broker restarts, on the reference broker and on a RabbitMQ node of the benchmark's own.

For each broker and each N, N instances of one TYPE are served by two child processes
(:class:`gear.testing.Fleet`; ``--processes`` more, up to one per instance as a fleet of containers
runs); a client here then

* gathers ``TYPE.*`` with ``expected=N`` (the time until every reply came) and without it (the replies
  within ``--window`` seconds);
* calls random instances ``TYPE.hK`` (point-to-point) and the shared ``TYPE`` (stateless) one at a time:
  p50 and p99 of ``--calls`` calls each;
* casts once to ``TYPE.*`` (multicast): the casts the instances took, of N;
* reads the broker's memory (the growth since before the fleet, per instance) and CPU at rest, and the
  children's resident memory per instance;
* restarts the broker (the reference broker: its process stopped and started again on the same port,
  empty; RabbitMQ: ``stop_app``, ``--down`` seconds, ``start_app``) while a caller keeps calling random
  instances (``timeout=5``): the time from the broker's return until every instance serves again, the
  broker's CPU meanwhile, the calls that failed and the kernel's listen-queue overflows (SYNs dropped).

RabbitMQ runs as a node of its own (``scripts/rabbitmq-node --port 5731 --nofile 65536 start 4.3``, started
here when it is not running and stopped at the end, with its epmd at 4431): the system node's open-file
limit (1,024) refuses a fleet, and restarting a shared node disturbs its other users. ``--baseline DIR``
adds the reference broker from another checkout (``git worktree add /tmp/main main``), the SDK being this
one's, to show a broker change before and after in the same run.

Usage::

    python benchmarks/fleet.py                                   # 100, 1000, 2000, 5000 on both brokers
    python benchmarks/fleet.py --sizes 100,2000 --brokers reference --baseline /tmp/main
    python benchmarks/fleet.py --write-docs                      # also the tables into docs/benchmarks.md
    python benchmarks/fleet.py --json F; python benchmarks/fleet.py --from-json F --write-docs
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from _wire import free_port, rss_bytes
from all import write_blocks
from broker import cpu_seconds

import gear
from gear.link.admin import delete_queues
from gear.testing import Fleet

__all__ = ("main",)

ROOT = Path(__file__).resolve().parents[1]
NODE_SCRIPT = ROOT / "scripts" / "rabbitmq-node"
NODE_PORT = 5731
RELEASE = "4.3"
PROCESSES = 2
INSTANCE_TTL = "60"
"""Seconds an instance queue outlives its instance (``GEAR_INSTANCE_QUEUE_TTL``): a fleet's queues go
away soon after it, whatever the broker."""


# -- brokers ---------------------------------------------------------------------------------------


class Reference:
    """The reference broker as a child process on a fixed port, so that it can be restarted there."""

    def __init__(self, source: str | None = None, label: str = "reference") -> None:
        self.label = label
        self.source = source
        self.port = free_port()
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}/"
        self._proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        env = dict(os.environ)
        if self.source is not None:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, (self.source, env.get("PYTHONPATH"))))
        command = [sys.executable, "-m", "gear.broker", "--port", str(self.port)]
        self._proc = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.PIPE, env=env, cwd=self.source
        )
        assert self._proc.stdout is not None
        line = (await self._proc.stdout.readline()).decode()
        if "ready" not in line:
            raise RuntimeError(f"reference broker did not start: {line!r}")

    async def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 30)

    async def restart(self, down: float) -> None:
        await self.stop()
        await asyncio.sleep(down)
        await self.start()

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    async def memory(self) -> int:
        return rss_bytes(self.pid)


class Rabbit:
    """A RabbitMQ node of the benchmark's own (``scripts/rabbitmq-node --port``)."""

    label = f"RabbitMQ {RELEASE}"

    def __init__(self, port: int = NODE_PORT) -> None:
        self.port = port
        self.url = f"amqp://guest:guest@127.0.0.1:{port}/"
        self.started_here = False
        self.pid = 0

    def _node(self, *args: str, timeout: float = 300) -> str:
        done = subprocess.run(
            [str(NODE_SCRIPT), "--port", str(self.port), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"rabbitmq-node {' '.join(args)}: {(done.stderr or done.stdout).strip()}")
        return done.stdout

    async def ctl(self, *args: str) -> str:
        return await asyncio.to_thread(self._node, "ctl", RELEASE, *args)

    async def start(self) -> None:
        status = await asyncio.to_thread(self._node, "status", RELEASE)
        if "not running" in status:
            await asyncio.to_thread(self._node, "--nofile", "65536", "start", RELEASE)
            self.started_here = True
        self.pid = int((await self.ctl("eval", "list_to_integer(os:getpid()).")).strip())

    async def stop(self) -> None:
        if self.started_here:
            await asyncio.to_thread(self._node, "stop", RELEASE)

    async def restart(self, down: float) -> None:
        await self.ctl("stop_app")
        await asyncio.sleep(down)
        await self.ctl("start_app")

    async def memory(self) -> int:
        return int((await self.ctl("eval", "erlang:garbage_collect(), erlang:memory(total).")).strip())


Broker = Reference | Rabbit


# -- one fleet -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Row:
    """The figures of one broker and one fleet size."""

    broker: str
    size: int
    up_s: float
    gather_s: float
    gathered: int
    window_replies: int
    p2p_ms: tuple[float, float]
    stateless_ms: tuple[float, float]
    multicast: int
    broker_mib_per_instance: float
    broker_cpu_rest: float
    gear_mib_per_instance: float
    back_s: float
    back: int
    storm_cpu: float
    failed_calls: tuple[int, int]
    """During the restart storm: (failed, made)."""
    failed_at_rest: int = 0
    """Calls of the p2p and stateless series that failed (left out of their percentiles); -1: the
    fleet was not measured (``note`` says why)."""
    note: str = ""
    listen_overflows: int = 0
    """The kernel's listen-queue overflows (machine-wide, ``TcpExt ListenOverflows``) during the storm:
    each a SYN dropped, its client retrying after 1, 3, 7 s..."""


def _percentiles(samples: list[float]) -> tuple[float, float]:
    samples = sorted(samples)
    return samples[len(samples) // 2] * 1000, samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1000


async def _timed(call: Callable[[], Awaitable[object]], count: int) -> tuple[list[float], int]:
    """The durations of ``count`` calls made one at a time, and how many failed (left out)."""
    took, failed = [], 0
    for _ in range(count):
        began = time.perf_counter()
        try:
            await call()
        except gear.GearError:
            failed += 1
            continue
        took.append(time.perf_counter() - began)
    return took or [float("nan")], failed


@contextlib.asynccontextmanager
async def _fleet(
    url: str, type_: str, size: int, processes: int, start_wait: float
) -> AsyncIterator[list[Fleet]]:
    settings = {"GEAR_INSTANCE_QUEUE_TTL": INSTANCE_TTL}
    share = -(-size // processes)
    fleets = [
        Fleet(url, type_, min(share, size - first), first=first, settings=settings, start_wait=start_wait)
        for first in range(0, size, share)
    ]
    try:
        started = await asyncio.gather(*(f.start() for f in fleets), return_exceptions=True)
        for failed in started:
            if isinstance(failed, BaseException):
                raise failed
        yield fleets
    finally:
        await asyncio.gather(*(f.stop() for f in fleets), return_exceptions=True)


async def _serving(fleets: list[Fleet]) -> int:
    return sum(await asyncio.gather(*(f.serving() for f in fleets)))


async def measure(broker: Broker, size: int, args: argparse.Namespace) -> Row:
    """One fleet of ``size`` on ``broker``: start, call, rest, restart."""
    type_ = f"FLEET{uuid.uuid4().hex[:6].upper()}"
    before = await broker.memory()
    began = time.monotonic()
    async with (
        _fleet(broker.url, type_, size, args.processes, args.start_wait) as fleets,
        gear.Service.client(url=broker.url) as client,
    ):
        up = time.monotonic() - began
        hosts = [h for f in fleets for h in f.hosts]
        began = time.perf_counter()
        replies = await client.rpc.gather(f"{type_}.*", "echo", 1, timeout=120, expected=size)
        gather_s = time.perf_counter() - began
        window = await client.rpc.gather(f"{type_}.*", "echo", 1, timeout=args.window)
        p2p, p2p_failed = await _timed(lambda: client.rpc.call(random.choice(hosts), "echo", 1), args.calls)
        stateless, stateless_failed = await _timed(lambda: client.rpc.call(type_, "echo", 1), args.calls)
        await client.rpc.cast(f"{type_}.*", "note")
        until = time.monotonic() + 60
        taken = 0
        while time.monotonic() < until:
            taken = sum(await asyncio.gather(*(f.casts() for f in fleets)))
            if taken >= size:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(2)
        memory = await broker.memory()
        cpu = cpu_seconds(broker.pid)
        await asyncio.sleep(args.rest)
        rest_cpu = (cpu_seconds(broker.pid) - cpu) / args.rest
        gear_rss = sum(rss_bytes(f.pid) for f in fleets)
        overflows = listen_overflows()
        back_s, back, storm_cpu, failed = await _storm(broker, fleets, client, hosts, args)
        overflows = listen_overflows() - overflows
    names = [type_, *hosts]
    await delete_queues(broker.url, names)
    return Row(
        broker.label,
        size,
        up,
        gather_s,
        len(replies),
        len(window),
        _percentiles(p2p),
        _percentiles(stateless),
        taken,
        (memory - before) / size / 2**20,
        rest_cpu,
        gear_rss / size / 2**20,
        back_s,
        back,
        storm_cpu,
        failed,
        p2p_failed + stateless_failed,
        listen_overflows=overflows,
    )


def listen_overflows() -> int:
    """The kernel's count of SYNs dropped because a listen queue was full (0 where it is not known)."""
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return 0
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:"):
            fields = dict(zip(names.split()[1:], values.split()[1:], strict=True))
            return int(fields.get("ListenOverflows", 0))
    return 0


async def _storm(
    broker: Broker, fleets: list[Fleet], client: gear.Service, hosts: list[str], args: argparse.Namespace
) -> tuple[float, int, float, tuple[int, int]]:
    """Restart the broker under a caller: seconds from its return until every instance serves (or
    ``--storm-wait``), how many serve then, its CPU meanwhile and the (failed, made) calls."""
    calls = [0, 0]
    stop = asyncio.Event()

    async def caller() -> None:
        while not stop.is_set():
            calls[1] += 1
            try:
                await client.rpc.call(random.choice(hosts), "echo", 1, timeout=5)
            except gear.GearError:
                calls[0] += 1
            await asyncio.sleep(0.01)

    callers = [asyncio.create_task(caller()) for _ in range(4)]
    await broker.restart(args.down)
    returned = time.monotonic()
    cpu = cpu_seconds(broker.pid)
    size = sum(f.count for f in fleets)
    serving = await _serving(fleets)
    while serving < size and time.monotonic() - returned < args.storm_wait:
        await asyncio.sleep(0.1)
        serving = await _serving(fleets)
    back_s = time.monotonic() - returned
    storm_cpu = (cpu_seconds(broker.pid) - cpu) / max(back_s, 1e-3)
    await asyncio.sleep(1)  # the calls made while the last instances came back
    stop.set()
    await asyncio.gather(*callers)
    return back_s, serving, storm_cpu, (calls[0], calls[1])


# -- report ----------------------------------------------------------------------------------------


def _n(value: int) -> str:
    return f"{value:,}"


def _not_measured(broker: str, size: int, why: str) -> Row:
    nan = float("nan")
    none = (nan, nan)
    return Row(broker, size, nan, nan, 0, 0, none, none, 0, nan, nan, nan, nan, 0, nan, (0, 0), -1, why)


def _failed(row: Row) -> str:
    return f" (**{row.failed_at_rest} failed**)" if row.failed_at_rest else ""


def table(rows: list[Row]) -> str:
    """The markdown tables: calls, resources, restart storm; then the targets."""
    lines = [
        "| broker | N | up | gather all (`expected=N`) | replies in the window (no `expected=`) "
        "| p2p p50 / p99 | stateless p50 / p99 | multicast |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r.failed_at_rest < 0:
            lines.append(f"| {r.broker} | {_n(r.size)} | **failed**: {r.note} |||||")
            continue
        lines.append(
            f"| {r.broker} | {_n(r.size)} | {r.up_s:.1f} s | {r.gather_s:.2f} s ({_n(r.gathered)}) "
            f"| {_n(r.window_replies)} | {r.p2p_ms[0]:.2f} / {r.p2p_ms[1]:.2f} ms "
            f"| {r.stateless_ms[0]:.2f} / {r.stateless_ms[1]:.2f} ms{_failed(r)} "
            f"| {_n(r.multicast)} of {_n(r.size)} |"
        )
    lines += [
        "",
        "| broker | N | broker memory per instance | broker CPU at rest | Gear memory per instance "
        "| all back after restart | broker CPU meanwhile | failed calls | listen-queue overflows |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        back = (
            f"{r.back_s:.1f} s"
            if r.back >= r.size
            else f"**{_n(r.back)} of {_n(r.size)} after {r.back_s:.0f} s**"
        )
        lines.append(
            f"| {r.broker} | {_n(r.size)} | {r.broker_mib_per_instance:.3f} MiB | {r.broker_cpu_rest:.0%} "
            f"| {r.gear_mib_per_instance:.2f} MiB | {back} | {r.storm_cpu:.0%} "
            f"| {r.failed_calls[0]} of {r.failed_calls[1]} | {_n(r.listen_overflows)} |"
        )
    return "\n".join(lines) + "\n\n" + targets(rows)


def targets(rows: list[Row]) -> str:
    """Issue 37's targets, checked on these rows (each broker against itself at 100, and RabbitMQ)."""
    out = []
    by = {(r.broker, r.size): r for r in rows if r.failed_at_rest >= 0}
    for broker in dict.fromkeys(r.broker for r in rows):
        if not broker.startswith("reference"):
            continue
        small = by.get((broker, 100))
        for size in (2000, 5000):
            row = by.get((broker, size))
            if row is None or small is None:
                continue
            ratio = row.p2p_ms[0] / small.p2p_ms[0]
            rabbit = by.get((Rabbit.label, size))
            versus = (
                f"; RabbitMQ's at {_n(size)}: {rabbit.p2p_ms[0]:.2f} ms "
                f"({'no worse' if row.p2p_ms[0] <= rabbit.p2p_ms[0] else 'worse'})"
                if rabbit is not None
                else ""
            )
            met = "met" if ratio <= 1.3 else "not met"
            out.append(
                f"- {broker}: p2p p50 at {_n(size)} is {ratio:.2f}x the p50 at 100 "
                f"(target 1.3x: {met}){versus}."
            )
    for r in by.values():
        if r.size == 2000:
            met = "met" if r.back >= r.size and r.back_s <= 10 else "not met"
            out.append(
                f"- {r.broker}: all 2,000 back {r.back_s:.1f} s after the restart (target 10 s: {met})."
            )
    return "\n".join(out)


# -- main ------------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> list[Row]:
    brokers: list[Broker] = []
    for name in args.brokers.split(","):
        if name == "reference":
            if args.baseline:
                brokers.append(Reference(args.baseline, "reference (baseline)"))
            brokers.append(Reference())
        elif name == "rabbitmq":
            brokers.append(Rabbit(args.rabbitmq_port))
    rows = []
    for broker in brokers:
        await broker.start()
        try:
            for size in (int(s) for s in args.sizes.split(",")):
                try:
                    row = await measure(broker, size, args)
                except (RuntimeError, gear.GearError) as exc:  # larger fleets would fare no better
                    print(f"{broker.label}, {size}: {exc}", file=sys.stderr, flush=True)
                    rows.append(_not_measured(broker.label, size, str(exc)))
                    break
                print(json.dumps(asdict(row)), file=sys.stderr, flush=True)
                rows.append(row)
        finally:
            await broker.stop()
    return rows


def _row(saved: dict[str, Any]) -> Row:
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()}
    return Row(**values)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,2000,5000", help="fleet sizes, comma-separated")
    parser.add_argument("--brokers", default="reference,rabbitmq", help="reference, rabbitmq")
    parser.add_argument("--baseline", help="also the reference broker of this checkout (its root)")
    parser.add_argument(
        "--rabbitmq-port", type=int, default=NODE_PORT, help="the AMQP port of the benchmark's RabbitMQ node"
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=PROCESSES,
        help="worker processes the instances are spread over (a fleet of one-instance containers: N)",
    )
    parser.add_argument("--calls", type=int, default=400, help="calls per p50/p99")
    parser.add_argument("--window", type=float, default=2.0, help="seconds of the gather without expected=")
    parser.add_argument("--rest", type=float, default=5.0, help="seconds the broker's idle CPU is read over")
    parser.add_argument("--down", type=float, default=2.0, help="seconds the broker stays down")
    parser.add_argument(
        "--storm-wait", type=float, default=180.0, help="seconds to wait for the fleet's return"
    )
    parser.add_argument(
        "--start-wait", type=float, default=600.0, help="seconds a fleet may take to start (then: not up)"
    )
    parser.add_argument("--write-docs", action="store_true", help="write the tables into docs/benchmarks.md")
    parser.add_argument(
        "--block", default="fleet", help="the docs block to write (fleet, fleet-large, fleet-10k)"
    )
    parser.add_argument("--json", type=Path, help="also write the rows as JSON to this file")
    parser.add_argument("--from-json", type=Path, help="run nothing: print (and --write-docs) saved rows")
    args = parser.parse_args(argv)
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        command = saved["command"]
        rows = [_row(r) for r in saved["rows"]]
    else:
        command = "python benchmarks/fleet.py" + "".join(f" {a}" for a in (argv or sys.argv[1:]))
        command = command.replace(" --write-docs", "").replace(f" --block {args.block}", "")
        command = command.replace(f" --rabbitmq-port {args.rabbitmq_port}", "")
        command = command.replace(f" --json {args.json}", "")
        rows = asyncio.run(run(args))
        if args.json:
            args.json.write_text(json.dumps({"command": command, "rows": [asdict(r) for r in rows]}))
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    block = f"`{command}` ({when}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}):\n\n{table(rows)}"
    print(block)
    if args.write_docs and write_blocks({args.block: block}):
        raise SystemExit(f"docs/benchmarks.md has no <!-- bench:{args.block} --> block")


if __name__ == "__main__":
    main()

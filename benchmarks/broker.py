"""Reference broker vs RabbitMQ: the brokers' own throughput and CPU per message, in one run.

    python benchmarks/broker.py [--rabbitmq amqp://guest:guest@127.0.0.1:5672/] [--rounds 3]
        [--messages 40000] [--pairs 2] [--size 1024] [--backlog 100000] [--skip-rabbitmq]

Load comes from separate client *processes* (``benchmarks/_amqp_load.py``) that spend a few
microseconds per message: ``--pairs`` publishers, each writing pre-encoded transient messages to its
own queue with publisher confirms in windows of 256, and as many consumers with a prefetch of 512
acking with ``multiple``. Each round times publish -> consume of ``--messages`` messages in all and
reads the broker process's CPU time (user + system; ``beam.smp`` for RabbitMQ, the
``python -m gear.broker`` child for the reference broker) before and after.

Reported per broker (medians of interleaved rounds): messages/s and the broker's CPU microseconds
per message. CPU per message is the stable figure on a shared machine; throughput depends on how
much CPU the clients and other processes leave the broker. RabbitMQ is shared with anything else
that uses it, whose CPU is counted too (run on a quiet machine for tight figures).

``--loop asyncio|uvloop`` picks the reference broker's event loop (default: what ``python -m
gear.broker`` picks, uvloop when installed; the table says which). ``--baseline DIR`` adds the
reference broker of another checkout (e.g. ``git worktree add /tmp/main main``), measured in the same
interleaved rounds, to compare a change with what it changes.

Last, the reference broker's peak RSS while a ``--backlog`` x 1 KiB backlog sits in one queue.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiormq

from gear.eventloop import loop_name

__all__ = ("main", "measure_broker", "reference_broker")

LOAD = str(Path(__file__).with_name("_amqp_load.py"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def reference_broker(*extra: str, source: str | None = None) -> Iterator[tuple[str, int]]:
    """Start ``python -m gear.broker`` on a free port (from ``source``, another checkout's root, if
    given: the child runs there, so ``-m`` finds that checkout first); yields (url, pid)."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gear.broker", "--port", str(port), *extra],
        stdout=subprocess.PIPE,
        text=True,
        cwd=source,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "recovered" in line:  # --data-dir: the recovery summary comes first
            line = proc.stdout.readline()
        if "ready" not in line:
            raise RuntimeError(f"reference broker did not start: {line!r}")
        yield f"amqp://guest:guest@127.0.0.1:{port}/", proc.pid
    finally:
        proc.terminate()
        proc.wait(10)


def rabbitmq_pid() -> int | None:
    """The pid of the local ``beam.smp`` (RabbitMQ's Erlang VM), or None."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if (entry / "comm").read_text().strip() == "beam.smp":
                    return int(entry.name)
    return None


def cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of one process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def server_version(url: str) -> str:
    """The broker's product and version from its Connection.Start."""
    conn = await aiormq.connect(url)
    try:
        props = conn.server_properties
        product, version = props.get("product", "?"), props.get("version", "?")
        return f"{product!s} {version!s}"
    finally:
        await conn.close()


@dataclass(frozen=True, slots=True)
class Round:
    """One measured publish -> consume run."""

    messages: int
    seconds: float
    broker_cpu: float

    @property
    def rate(self) -> float:
        return self.messages / self.seconds

    @property
    def cpu_us(self) -> float:
        return self.broker_cpu / self.messages * 1e6


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, LOAD, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def _expect(proc: subprocess.Popen[str], word: str) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith(word):
        raise RuntimeError(f"load worker said {line!r}, expected {word!r}")
    return line


async def _declare(url: str, names: list[str], delete: bool = False) -> None:
    conn = await aiormq.connect(url)
    try:
        channel = await conn.channel()
        for name in names:
            if delete:
                await channel.queue_delete(name)
            else:
                await channel.queue_declare(name)
    finally:
        await conn.close()


async def measure_broker(
    url: str, pid: int, messages: int, pairs: int = 2, size: int = 1024, consumers: bool = True
) -> Round:
    """Publish ``messages`` transient messages through ``pairs`` queues (and consume them)."""
    names = [f"bench-broker-{uuid.uuid4().hex[:8]}" for _ in range(pairs)]
    await _declare(url, names)
    per = messages // pairs
    procs: list[subprocess.Popen[str]] = []
    try:
        for name in names:
            if consumers:
                procs.append(_spawn("consume", url, name, str(per)))
            procs.append(_spawn("publish", url, name, str(per), "--size", str(size)))
        for proc in procs:
            _expect(proc, "ready")
        cpu_before = cpu_seconds(pid)
        start = time.perf_counter()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            _expect(proc, "done")
        seconds = time.perf_counter() - start
        cpu = cpu_seconds(pid) - cpu_before
        return Round(per * pairs, seconds, cpu)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        if consumers:
            await _declare(url, names, delete=True)


def _peak_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


@dataclass
class Figures:
    """One broker's results."""

    version: str
    rate: float = 0.0
    cpu_us: float = 0.0
    rss_idle: float | None = None
    rss_backlog: float | None = None


async def run(args: argparse.Namespace) -> dict[str, Figures]:
    """Interleaved rounds on both brokers; returns per-broker medians (and the reference backlog RSS)."""
    rabbit_pid = None if args.skip_rabbitmq else rabbitmq_pid()
    brokers: dict[str, tuple[str, int]] = {}
    rounds: dict[str, list[Round]] = {}
    out: dict[str, Figures] = {}
    if args.loop:
        os.environ["GEAR_LOOP"] = args.loop
    with contextlib.ExitStack() as stack:
        ref_url, ref_pid = stack.enter_context(reference_broker("--memory-high-watermark", "0.9"))
        brokers["reference"] = (ref_url, ref_pid)
        if args.baseline:
            started = reference_broker("--memory-high-watermark", "0.9", source=args.baseline)
            brokers["baseline"] = stack.enter_context(started)
        if rabbit_pid is not None:
            brokers["rabbitmq"] = (args.rabbitmq, rabbit_pid)
        elif not args.skip_rabbitmq:
            print("no beam.smp process found: RabbitMQ skipped", file=sys.stderr)
        for name, (url, pid) in brokers.items():
            rounds[name] = []
            out[name] = Figures(await server_version(url))
            await measure_broker(url, pid, min(args.messages, 4000), args.pairs, args.size)  # warm-up
        out["reference"].version += f", {loop_name()}"
        if "baseline" in out:
            out["baseline"].version += f", {loop_name()}, from {args.baseline}"
        for round_no in range(args.rounds):
            for name, (url, pid) in brokers.items():
                rounds[name].append(await measure_broker(url, pid, args.messages, args.pairs, args.size))
            print(f"round {round_no + 1}/{args.rounds} done", file=sys.stderr)
        for name, done in rounds.items():
            out[name].rate = _median([r.rate for r in done])
            out[name].cpu_us = _median([r.cpu_us for r in done])
        if args.backlog:
            for name in ("reference", "baseline"):
                if name not in brokers:
                    continue
                url, pid = brokers[name]
                before = _peak_rss(pid)
                await measure_broker(url, pid, args.backlog, 1, 1024, consumers=False)
                out[name].rss_idle = before / 2**20
                out[name].rss_backlog = _peak_rss(pid) / 2**20
    return out


def report(out: dict[str, Figures], args: argparse.Namespace) -> str:
    """The table, in the docs' format (docs/benchmarks.md)."""
    lines = [
        f"publish -> consume, {args.pairs} publisher + {args.pairs} consumer processes, transient "
        f"{args.size} B messages, confirms in windows of 256, prefetch 512; median of {args.rounds} "
        "interleaved rounds",
        "",
        "| broker | msg/s | broker CPU per msg (us) |",
        "|---|---:|---:|",
    ]
    for name, row in out.items():
        lines.append(f"| {name} ({row.version}) | {row.rate:,.0f} | {row.cpu_us:.1f} |")
    ref = out["reference"]
    for other in ("rabbitmq", "baseline"):
        if other in out:
            rate, cpu = ref.rate / out[other].rate, ref.cpu_us / out[other].cpu_us
            lines.append(f"| reference / {other} | {rate:.2f}x | {cpu:.2f}x |")
    if "baseline" in out and "rabbitmq" in out:
        base, rab = out["baseline"], out["rabbitmq"]
        rate, cpu = base.rate / rab.rate, base.cpu_us / rab.cpu_us
        lines.append(f"| baseline / rabbitmq | {rate:.2f}x | {cpu:.2f}x |")
    if ref.rss_idle is not None and ref.rss_backlog is not None:
        lines.append("")
        lines.append(
            f"reference broker peak RSS: {ref.rss_idle:.1f} MiB idle, {ref.rss_backlog:.1f} MiB with "
            f"{args.backlog:,} x 1 KiB messages queued"
        )
    was = out.get("baseline")
    if was is not None and was.rss_idle is not None and was.rss_backlog is not None:
        lines.append(
            f"baseline broker peak RSS: {was.rss_idle:.1f} MiB idle, {was.rss_backlog:.1f} MiB with "
            f"{args.backlog:,} x 1 KiB messages queued"
        )
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--rabbitmq", default=os.environ.get("GEAR_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
    )
    p.add_argument("--messages", type=int, default=40_000, help="messages per round, all pairs together")
    p.add_argument("--pairs", type=int, default=2, help="publisher/consumer process pairs (one queue each)")
    p.add_argument("--size", type=int, default=1024, help="body bytes")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are reported")
    p.add_argument("--backlog", type=int, default=100_000, help="0 skips the backlog memory figure")
    p.add_argument("--skip-rabbitmq", action="store_true")
    p.add_argument("--loop", choices=("asyncio", "uvloop"), help="the reference broker's event loop")
    p.add_argument("--baseline", help="also measure the reference broker of this checkout's root")
    return p


def main(argv: list[str] | None = None) -> str:
    """Run and print the table; returns it."""
    args = parser().parse_args(argv)
    table = report(asyncio.run(run(args)), args)
    print(table)
    return table


if __name__ == "__main__":
    main()

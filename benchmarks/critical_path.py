"""Benchmark: one call in flight, its wall time stage by stage, caller and server in processes of their own.

    python benchmarks/critical_path.py [--url URL] [--seconds 6] [--loop asyncio|uvloop]

A call's critical path crosses four pairs of hands: the caller builds and writes the request, the
broker routes it and the server's process wakes up to read it, the server reads it, runs the handler
and writes the reply, the broker routes that and the caller's process wakes up, and the caller reads
the reply and returns it. Both processes run on the loop Gear's entry points pick (``gear.run``:
uvloop where it is installed; ``--loop`` names one) and record, on the machine's monotonic clock (one
clock for all processes), when each read of a delivery starts and ends (``Stream.data_received``, the
read callback that parses the frames and hands the delivery on), when each write starts and ends
(``Stream.flush``, one ``send``), and the caller when each call starts and returns; each call is then
matched with the server's read and write of its request. Prints the median of each stage over the
calls, and the three sums that say where the time goes: Gear's Python (the caller's and the server's
own stages), the two ``send`` system calls, and the two hops through the broker, each ending with the
wake-up of a process that slept in ``epoll_wait``. The instrumentation adds a few microseconds per stage.

The same job in Go (``benchmarks/go/rpcbench.go``, skipped with the reason where Go or amqp091-go is
missing) takes turns of a second with Gear's calls, on the same broker, with its stages stamped on
the same clock (its ``trace`` command and ``RPCBENCH_TRACE``): when a call starts, when its request's
publish returned, when the server got the request and when its reply's publish returned (matched by
the request's id), when the reply reached the caller's code, and when the call returns. amqp091-go
reads in a goroutine of its own and hands each delivery over through a Go channel, so Go's stamps
cannot split a hop from that read; the two are compared in five stages that both can draw, the end of
Gear's read callback standing for the moment a delivery comes out of amqp091-go's channel.

Last, the cost of running cold: building a request (``RPC._prepare``) is timed inside the calls and
then 20,000 times in a row; between two calls the broker and the server run on the same CPUs, so
inside the calls that code starts with caches full of their data, not its own.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import gobench
from _cleanup import delete_queues
from rpc import PAYLOAD, loop_runner

import gear
from gear.amqp import ClientConnection
from gear.base.envelope import Kind
from gear.eventloop import loop_name
from gear.link.stream import Stream
from gear.serving.inbound import Router

__all__ = ("main",)

Span = tuple[int, int]
"""Start and end of one event, in ns on ``time.monotonic_ns``'s clock."""


class Recorder:
    """Records this process's delivery reads and actual writes by wrapping the stream's methods."""

    def __init__(self) -> None:
        self.reads: list[Span] = []
        self.writes: list[Span] = []
        self._delivered = False
        self._taken = b""

    def install(self) -> None:
        """Wrap ``Stream.data_received``, ``Stream.flush``, ``Router.on_delivery`` and
        ``ClientConnection.data_to_send`` (class-wide)."""
        read, flush, on_delivery = Stream.data_received, Stream.flush, Router.on_delivery
        take = ClientConnection.data_to_send
        now = time.monotonic_ns

        def data_received(stream: Stream, data: bytes) -> None:
            self._delivered = False
            start = now()
            read(stream, data)
            if self._delivered:
                self.reads.append((start, now()))

        def flushed(stream: Stream) -> None:
            self._taken = b""
            start = now()
            flush(stream)
            if self._taken:  # something was written (not the loop's clock: uvloop's ticks in ms)
                self.writes.append((start, now()))

        def taken(core: ClientConnection) -> bytes:
            self._taken = take(core)
            return self._taken

        def delivered(router: Router, delivery: Any, settle: Any) -> None:
            self._delivered = True
            on_delivery(router, delivery, settle)

        setattr(Stream, "data_received", data_received)  # noqa: B010 - instrumenting on purpose
        setattr(Stream, "flush", flushed)  # noqa: B010
        setattr(Router, "on_delivery", delivered)  # noqa: B010
        setattr(ClientConnection, "data_to_send", taken)  # noqa: B010

    def clear(self) -> None:
        self.reads.clear()
        self.writes.clear()


# -- the server (a child process) -----------------------------------------------------------------


async def _serve(url: str, tag: str) -> None:
    """Serve ``echo`` until a line on stdin names the file for this process's events; write them."""
    recorder = Recorder()
    recorder.install()
    svc = gear.Service("PATH" + tag, "s1", url=url, prefetch=256)

    @svc.handler("echo")
    async def echo(payload: dict[str, Any]) -> dict[str, Any]:
        return payload

    await svc.start()
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    line = await loop.run_in_executor(None, sys.stdin.readline)
    events = json.dumps({"reads": recorder.reads, "writes": recorder.writes})
    await loop.run_in_executor(None, Path(line.strip()).write_text, events)
    await svc.stop()
    print("done", flush=True)


# -- the caller (this process) --------------------------------------------------------------------


WARM_BUILDS = 20_000
"""How many requests the warm measurement builds in a row."""


def _timed(func: Any, into: list[int]) -> Any:
    """``func``, appending the ns each call of it takes to ``into``."""
    now = time.perf_counter_ns

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = now()
        try:
            return func(*args, **kwargs)
        finally:
            into.append(now() - start)

    return timed


def _warm_builds(svc: gear.Service, target: str) -> list[int]:
    """The ns each of :data:`WARM_BUILDS` request builds takes, one right after another (nothing
    else runs in between, so the code and data they touch stay in the CPU's caches)."""
    took: list[int] = []
    build = _timed(svc.rpc._prepare, took)
    for _ in range(WARM_BUILDS):
        build(target, "echo", PAYLOAD, None, Kind.CALL, svc.identity)
    return took


class GoTrace:
    """The same job in Go with its stages stamped: its server (``RPCBENCH_TRACE``) and its client."""

    def __init__(self, server: asyncio.subprocess.Process, client: gobench.GoClient, path: Path) -> None:
        self._server = server
        self._client = client
        self._path = path
        self._calls: list[list[int]] = []
        """Each traced call's ``[id, start, published, reply, end]``."""

    @classmethod
    async def start(cls, url: str, binary: Path, directory: Path) -> GoTrace:
        """Start the server and the client (the server's stamps go to a file in ``directory``).

        Raises:
            RuntimeError: either did not start.
        """
        tag = uuid.uuid4().hex[:6]
        path = directory / "go-server.json"
        server = await asyncio.create_subprocess_exec(
            *gobench.server_command(binary, url, tag),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ, "RPCBENCH_TRACE": str(path)},
        )  # fmt: skip
        assert server.stdout is not None
        if (await asyncio.wait_for(server.stdout.readline(), 60)).strip() != b"ready":
            raise RuntimeError("the Go server did not start")
        return cls(server, await gobench.GoClient.start(binary, url, tag), path)

    async def turn(self, seconds: float) -> None:
        """One call after another for ``seconds``, stamped."""
        self._calls += await self._client.trace(seconds)

    async def close(self) -> list[list[int]]:
        """Stop both; the stages of each call turned since the last :meth:`forget` (:func:`go_stages`,
        with the server's stamps, ``[id, got, published]`` per request)."""
        await self._client.close()
        assert self._server.stdin is not None
        self._server.stdin.close()
        await asyncio.wait_for(self._server.wait(), 20)
        return go_stages(self._calls, json.loads(self._path.read_text())["requests"])

    def forget(self) -> None:
        """Leave the calls made so far (a warm-up) out of :meth:`close`'s."""
        self._calls.clear()


async def _calls(
    url: str,
    tag: str,
    seconds: float,
    recorder: Recorder,
    go: Path | None,
    queues: list[str],
    builds: dict[str, list[int]],
    directory: Path,
) -> tuple[list[Span], list[list[int]]]:
    """Make calls one after another for ``seconds`` in turns of a second (after a warm-up), the Go
    job's stamped turns between them; Gear's call spans and Go's stages per call (:func:`go_stages`).
    The caller's queues are added to ``queues``, to be deleted once the server has stopped. ``builds``
    gets the ns each request build took inside those calls (``"in calls"``) and in a tight loop
    (``"warm"``)."""
    svc = gear.Service.client(url=url, prefetch=512)
    await svc.start()
    queues += [q.name for q in svc.topology.queues]
    target = f"PATH{tag}.s1"
    go_turns = None if go is None else await GoTrace.start(url, go, directory)
    calls: list[Span] = []
    go_rows: list[list[int]] = []
    now = time.monotonic_ns
    try:
        warm_until = time.perf_counter() + min(2.0, seconds)
        while time.perf_counter() < warm_until:
            await svc.rpc.call(target, "echo", PAYLOAD)
        if go_turns is not None:
            await go_turns.turn(1.0)
            go_turns.forget()
        recorder.clear()
        in_calls = builds.setdefault("in calls", [])
        svc.rpc._prepare = _timed(svc.rpc._prepare, in_calls)  # type: ignore[method-assign]
        left = seconds
        while left > 0:
            turn = min(1.0, left)
            left -= turn
            end = now() + int(turn * 1e9)
            while (start := now()) < end:
                await svc.rpc.call(target, "echo", PAYLOAD)
                calls.append((start, now()))
            if go_turns is not None:
                await go_turns.turn(turn)
        del svc.rpc._prepare
        builds["warm"] = _warm_builds(svc, target)
    finally:
        if go_turns is not None:
            go_rows = await go_turns.close()
        await svc.stop()
    return calls, go_rows


def _first_after(spans: list[Span], starts: list[int], t: int) -> Span | None:
    i = bisect.bisect_left(starts, t)
    return spans[i] if i < len(spans) else None


STAGES = (
    ("caller: builds and writes the request", "python"),
    ("caller: send", "send"),
    ("broker, then the server's wake-up", "hop"),
    ("server: read callback (parse, route, start the handler's task)", "python"),
    ("server: handler's task runs, reply built and written", "python"),
    ("server: send", "send"),
    ("broker, then the caller's wake-up", "hop"),
    ("caller: read callback (parse, route, resolve the call)", "python"),
    ("caller: the waiting task resumes and returns", "python"),
)


def match(calls: list[Span], caller: Recorder, server: dict[str, list[Span]]) -> list[list[int]]:
    """Per call, the ns spent in each of :data:`STAGES` (calls that cannot be matched are left out)."""
    cw = caller.writes
    sr: list[Span] = [(s, e) for s, e in server["reads"]]
    sw: list[Span] = [(s, e) for s, e in server["writes"]]
    cw_starts, sr_starts, sw_starts = [s for s, _ in cw], [s for s, _ in sr], [s for s, _ in sw]
    cr_ends = [e for _, e in caller.reads]
    rows: list[list[int]] = []
    for start, end in calls:
        request = _first_after(cw, cw_starts, start)
        if request is None or request[1] > end:
            continue
        i = bisect.bisect_right(cr_ends, end) - 1  # the last delivery read before the call returned
        if i < 0 or caller.reads[i][0] < request[1]:
            continue
        reply = caller.reads[i]
        got = _first_after(sr, sr_starts, request[1])
        if got is None or got[1] > reply[0]:
            continue
        sent = _first_after(sw, sw_starts, got[1])
        if sent is None or sent[1] > reply[0]:
            continue
        rows.append([
            request[0] - start, request[1] - request[0], got[0] - request[1], got[1] - got[0],
            sent[0] - got[1], sent[1] - sent[0], reply[0] - sent[1], reply[1] - reply[0], end - reply[1],
        ])  # fmt: skip
    return rows


SIDE_BY_SIDE = (
    ("caller: request built and written", (0, 1)),
    ("broker, the server's wake-up, the delivery read and handed on", (2, 3)),
    ("server: handler run, reply built and written", (4, 5)),
    ("broker, the caller's wake-up, the reply read and handed on", (6, 7)),
    ("caller: the call returns", (8,)),
)
"""Gear's and Go's calls in the same five stages: which of :data:`STAGES` make up each of Gear's.
Go's stamps are taken in its own code (amqp091-go reads in a goroutine of its own and hands each
delivery over through a Go channel), so a delivery is "read and handed on" when it comes out of that
channel, and the end of Gear's read callback is the same point."""


def go_stages(calls: list[list[int]], requests: list[list[int]]) -> list[list[int]]:
    """Per Go call, the ns spent in each of :data:`SIDE_BY_SIDE`'s stages (calls whose request the
    server did not stamp are left out)."""
    served = {r[0]: r for r in requests}
    rows: list[list[int]] = []
    for ident, start, published, reply, end in calls:
        request = served.get(ident)
        if request is None:
            continue
        _, got, replied = request
        rows.append([published - start, got - published, replied - got, reply - replied, end - reply])
    return rows


def report(
    rows: list[list[int]],
    calls: int,
    loop: str,
    seconds: float,
    go: list[list[int]],
    why: str,
    builds: dict[str, list[int]],
) -> None:
    def us(ns: float) -> str:
        return f"{ns / 1000:,.0f}"

    totals = [sum(r) for r in rows]
    total = statistics.median(totals)
    print(
        f"One call in flight, Gear on {loop}, caller and server in processes of their own: {len(rows):,} "
        f"of {calls:,} calls of {seconds:g} s matched; median per stage, us (and share of the median call)\n"
    )
    print("| stage | us | share |")
    print("|---|---:|---:|")
    for k, (name, _) in enumerate(STAGES):
        m = statistics.median(r[k] for r in rows)
        print(f"| {name} | {us(m)} | {m / total:.0%} |")
    print(f"| **the call** | **{us(total)}** | |")
    print("\nWhere the time goes, median of the per-call sums:\n")
    for kind, label in (
        ("python", "Gear's Python (the caller's and the server's own stages)"),
        ("send", "the two `send` system calls"),
        ("hop", "the two hops through the broker, each with a wake-up"),
    ):
        picked = [k for k, (_, what) in enumerate(STAGES) if what == kind]
        m = statistics.median(sum(r[k] for k in picked) for r in rows)
        print(f"- {label}: {us(m)} us ({m / total:.0%})")
    if go:
        go_total = statistics.median(sum(r) for r in go)
        print(
            f"\nThe same job in Go, in turns with Gear's: {len(go):,} calls, p50 {us(go_total)} us (Gear's "
            f"p50 {us(total)} us: {total / go_total:.2f}x); both, stage by stage (median per stage, us):\n"
        )
        print("| stage | Gear | Go | Gear - Go |")
        print("|---|---:|---:|---:|")
        for k, (name, parts) in enumerate(SIDE_BY_SIDE):
            mine = statistics.median(sum(r[i] for i in parts) for r in rows)
            theirs = statistics.median(r[k] for r in go)
            print(f"| {name} | {us(mine)} | {us(theirs)} | {us(mine - theirs)} |")
        print(f"| **the call** | **{us(total)}** | **{us(go_total)}** | **{us(total - go_total)}** |")
    else:
        print(f"\nThe same job in Go: skipped ({why}).")
    if builds.get("in calls") and builds.get("warm"):
        cold, warm = statistics.median(builds["in calls"]), statistics.median(builds["warm"])
        print(
            f"\nThe same code, cold and warm: building a request (`RPC._prepare`, part of the caller's "
            f"first stage) took {cold / 1000:.1f} us inside these calls and {warm / 1000:.1f} us when "
            f"{WARM_BUILDS:,} builds ran in a row ({cold / warm:.1f}x; medians)."
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("GEAR_URL", "amqp://guest:guest@127.0.0.1:5672/"))
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default=loop_name())
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        with loop_runner(args.loop) as runner:
            runner.run(_serve(args.url, args.serve))
        return
    tag = uuid.uuid4().hex[:6].upper()
    command = [sys.executable, __file__, "--serve", tag, "--url", args.url, "--loop", args.loop]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert server.stdin is not None
    assert server.stdout is not None
    queues = [f"PATH{tag}", f"PATH{tag}.s1"]
    try:
        if server.stdout.readline().strip() != "ready":
            raise SystemExit("the server did not start")
        binary, why = gobench.build()
        recorder = Recorder()
        recorder.install()
        builds: dict[str, list[int]] = {}
        with tempfile.TemporaryDirectory() as tmp, loop_runner(args.loop) as runner:
            directory = Path(tmp)
            calls, go = runner.run(
                _calls(args.url, tag, args.seconds, recorder, binary, queues, builds, directory)
            )
            path = directory / "server.json"
            server.stdin.write(f"{path}\n")
            server.stdin.flush()
            if server.stdout.readline().strip() != "done":
                raise SystemExit("the server did not report its events")
            events = json.loads(path.read_text())
    finally:
        server.stdin.close()
        server.wait(10)
        asyncio.run(delete_queues(args.url, queues))
    rows = match(calls, recorder, events)
    if not rows:
        raise SystemExit("no call could be matched with the server's events")
    report(rows, len(calls), args.loop, args.seconds, go, why, builds)


if __name__ == "__main__":
    main()

"""Benchmark: call throughput with tracing off and on, with and without OpenTelemetry, same run.

    python benchmarks/tracing_overhead.py [--url amqp://guest:guest@127.0.0.1:5672/] [--calls 3000]
        [--concurrency 32] [--rounds 3] [--slices 10] [--sample 0.05]

Each round starts, for every side, its own server instance (an echo handler) and caller instance, and
gives every side ``--slices`` turns of ``calls / slices`` calls, in a new order each time, so that a
drift in the machine's speed hits all sides alike (one side after another, a few seconds each, the
sides differed by 10-20% from drift alone on a 2-core VM); the services are new each round because one
pair of connections and queues can run a few percent faster than another for the same work (with
fresh pairs, three identical untraced sides agreed within 2%). ``off`` is three untraced pairs taken
together, so the baseline every ratio divides by is the steadiest figure of the round. Before each
turn the SDK's span processors catch up, trace files are written out and garbage is collected; each
turn's own events are written and its spans exported inside it. The sides:

* ``off``: no Gear events, no spans (``NullTracer``, OpenTelemetry bridge off);
* ``jsonl``: Gear's JSONL events (both instances writing), no spans: Gear without the ``otel`` extra;
* ``jsonl+otel-api``: JSONL events with the ``otel`` extra installed but no SDK configured (the
  OpenTelemetry API's no-op spans): what installing the extra costs by itself;
* ``jsonl+otel``: JSONL events plus OpenTelemetry spans and W3C headers, recorded by the SDK
  (``TracerProvider`` with a ``BatchSpanProcessor`` and an exporter that drops the spans), which is
  what an application with the ``otel`` extra and a configured SDK pays for both;
* ``otel``: those spans and headers without JSONL events (``GEAR_TRACE`` unset): how a service that
  sends its traces to an OpenTelemetry collector runs;
* each of the four again as ``... sampled``: both instances at ``GEAR_TRACE_SAMPLE=--sample`` (head
  sampling by trace id), the SDK with ``parentbased_traceidratio`` at the same rate, as a service that
  traces in production would run.

Prints the median of each side and the overheads ``1 - side/off`` (the target is under 5 %), also as
the median of each round's own ratio (``*_per_round``, steadier when the load drifts), plus how many
events were written. On a busy machine the round-to-round noise can exceed the effect, so it
also measures the tracer's own CPU cost per event (``emit`` on the caller's thread, and in total with
the writer thread's JSON encoding and I/O, for the 8 events of a call made through the typed emitters)
and the share of one core that costs at the untraced call rate (``cpu_share_at_off_rate``), and this
process's CPU per call for each side (``*_cpu_us_per_call``, events written included) with what tracing
adds to it (``cpu_overhead_*``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _cleanup import delete_queues, service_queues
from _trace_fakes import Delivery, Meta, Msg, sdk_provider

import gear
from gear.tracing import JsonlTracer, NullTracer, Tracer, tracer_from_env
from gear.tracing.spans import NO_SPANS, Spans, using_spans

__all__ = ("main",)


_PROVIDERS: list[Any] = []
"""Every SDK provider made: each side starts after their span processors have caught up."""


def _otel_spans(sample: float = 1.0) -> Spans:
    """The OpenTelemetry bridge with a real SDK provider whose exporter drops what it gets (sampling
    parent-based by trace-id ratio at ``sample``)."""
    from gear.tracing.otel import OtelSpans

    provider = sdk_provider(sample)
    _PROVIDERS.append(provider)
    return OtelSpans(provider)


def _quiesce() -> None:
    """Let the SDK's batch processors export what the last slice left (their thread's CPU would count
    against the next one), have the kernel write the trace files out (its writeback would compete with
    the next slice for the cores) and collect garbage."""
    for provider in _PROVIDERS:
        provider.force_flush()
    os.sync()
    gc.collect()


def _flush(*tracers: Tracer) -> None:
    for tracer in tracers:
        if isinstance(tracer, JsonlTracer):
            tracer.flush()


class _Pair:
    """One side's server (an echo handler) and caller, started once and measured in short slices taken
    in turn with the other sides', so that a drift in the machine's speed hits every side alike."""

    def __init__(self, url: str, trace_dir: Path | None, spans: Spans, sample: float) -> None:
        suffix = uuid.uuid4().hex[:6]
        self.url, self.server_type, client_type = url, f"BENCHS{suffix}", f"BENCHC{suffix}"

        def tracer(type_: str, host: str) -> Tracer:
            if trace_dir is None:
                return NullTracer()
            return tracer_from_env(type_, host, f"{type_}.{host}", directory=trace_dir, sample_rate=sample)

        self.tracers = (tracer(self.server_type, "s1"), tracer(client_type, "c1"))
        with using_spans(spans):
            self.server = gear.Service(
                self.server_type, "s1", url=url, tracer=self.tracers[0], trace_sample=sample
            )
            self.client = gear.Service(
                client_type, "c1", url=url, tracer=self.tracers[1], serve=False, trace_sample=sample
            )

        @self.server.handler("echo")
        async def echo(payload: dict[str, Any]) -> dict[str, Any]:
            return payload

    async def start(self) -> None:
        await self.server.start()
        await self.client.start()

    async def run(self, calls: int, concurrency: int) -> tuple[float, float]:
        """Make ``calls`` calls; the seconds they took and this process's CPU seconds, including
        writing their events and exporting their spans."""
        semaphore = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with semaphore:
                await self.client.rpc.call(self.server_type, "echo", {"i": i}, timeout=30)

        cpu = time.process_time()
        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(calls)))
        elapsed = time.perf_counter() - started
        _flush(*self.tracers)
        for provider in _PROVIDERS:  # this side's spans still queued are this side's cost
            provider.force_flush()
        return elapsed, time.process_time() - cpu

    async def close(self) -> int:
        """Stop both, delete their queues; the number of events written."""
        await self.client.stop()
        await self.server.stop()
        await delete_queues(self.url, service_queues(self.server, self.client))
        written = 0
        for t in self.tracers:
            t.close()
            if isinstance(t, JsonlTracer):
                written += t.sink.written
        return written


def _emit_cost(calls: int = 25_000) -> dict[str, float]:
    """CPU per event of the 8 events of one call, made through the typed emitters as the SDK makes them:
    on the caller's thread (``emit``), and in total with the writer thread's encoding and I/O."""
    from gear.tracing import Emitter, Resource, Settlement

    def tracer(type_: str, host: str) -> JsonlTracer:
        ids = {"service.name": type_, "host.name": host, "service.instance.id": f"{type_}.{host}.1"}
        return JsonlTracer(directory, Resource.model_validate(ids), max_pending=8 * calls + 1)

    with tempfile.TemporaryDirectory() as directory:
        web, repo = tracer("WEB", "web1"), tracer("REPO", "repo1")
        caller, callee = Emitter(web, "WEB.web1", spans=NO_SPANS), Emitter(repo, "REPO.repo1", spans=NO_SPANS)
        request = Msg(deadline_unix=time.time() + 30)
        reply = Msg(routing_key="WEB.web1", kind="gear.reply", body=b"{}")
        delivery, meta = Delivery(), Meta()
        cpu = time.process_time()
        thread = time.thread_time()
        for n in range(calls):
            message_id = f"{n:016x}.1"
            caller.publish(request, message_id, 1)
            caller.confirmed(request, message_id, 1)
            callee.deliver(delivery, meta)
            callee.publish(reply, message_id, 1)
            callee.confirmed(reply, message_id, 1)
            callee.reply_sent(meta, True, 0.0002)
            callee.settle(delivery, meta, Settlement.ACK)
            caller.response(meta.request_id, meta.trace_id, "put", "REPO.repo1", 0.0011, True)
        emit_s = time.thread_time() - thread
        web.close()
        repo.close()
        total_cpu = time.process_time() - cpu
    events = 8 * calls
    return {
        "emit_us_per_event": round(emit_s / events * 1e6, 2),
        "cpu_us_per_event": round(total_cpu / events * 1e6, 2),
    }


_SIDES = ("off", "jsonl", "jsonl+otel-api", "jsonl+otel", "otel")
"""The sides at full rate; each but ``off`` is also run sampled (``--sample``)."""


def _key(side: str) -> str:
    """A side's name as a JSON key fragment: ``jsonl+otel-api sampled`` -> ``jsonl_otel_api_sampled``."""
    return side.replace("+", "_").replace("-", "_").replace(" ", "_")


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    from gear.tracing.otel import OtelSpans

    full = list(_SIDES) if args.sides != "sampled" else ["off"]
    names = [*full, *(f"{side} sampled" for side in _SIDES[1:] if args.sides != "full")]
    sides: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    events = 0
    api_only = OtelSpans()  # follows the global (no-op) provider
    # the SDK as an application that samples would configure it: parent-based, trace-id ratio at the
    # same rate as Gear's, so both keep the same traces
    spans: dict[str, Spans] = {
        "off": NO_SPANS,
        "jsonl": NO_SPANS,
        "jsonl+otel-api": api_only,
        "jsonl sampled": NO_SPANS,
        "jsonl+otel-api sampled": api_only,
    }
    for side in ("jsonl+otel", "otel"):
        if side in names:
            spans[side] = _otel_spans()
        if f"{side} sampled" in names:
            spans[f"{side} sampled"] = _otel_spans(args.sample)
    per_slice = max(1, args.calls // args.slices)
    # the baseline is three untraced pairs taken together: one pair alone can be a few percent off
    turns = [*names, "off#2", "off#3"]
    warm_up = min(200, args.calls)
    with tempfile.TemporaryDirectory(prefix="gear-trace-bench-") as directory:
        for n in range(args.rounds):
            # fresh services each round: a pair's own connections and queues can make it a few percent
            # faster or slower than another for the same work, and that must not stick to one side
            pairs = {}
            for i, side in enumerate(turns):
                jsonl = side.startswith("jsonl")
                trace_dir = Path(directory) / f"{i}-{n}" if jsonl else None
                sample = args.sample if side.endswith("sampled") else 1.0
                pairs[side] = _Pair(args.url, trace_dir, spans[side.split("#")[0]], sample)
            try:
                for pair in pairs.values():
                    await pair.start()
                    await pair.run(warm_up, args.concurrency)
                spent = {side: [0.0, 0.0] for side in turns}
                for j in range(args.slices):
                    order = list(turns)
                    random.Random(n * 1000 + j).shuffle(order)  # no side always follows the same one
                    for side in order:
                        _quiesce()
                        elapsed, used = await pairs[side].run(per_slice, args.concurrency)
                        spent[side][0] += elapsed
                        spent[side][1] += used
            finally:
                for side, pair in pairs.items():
                    written = await pair.close()
                    events += written if side == "jsonl" else 0
            for side in names:
                mine = [spent[t] for t in turns if t.split("#")[0] == side]  # off: all its pairs together
                calls = per_slice * args.slices * len(mine)
                sides[side].append(calls / sum(e for e, _ in mine))
                cpu[side].append(sum(u for _, u in mine) / calls * 1e6)
            print(
                f"round {n + 1}: "
                + ", ".join(
                    f"{k} {v[-1]:,.0f} calls/s {cpu[k][-1]:.0f} us CPU/call" for k, v in sides.items()
                ),
                flush=True,
            )
    median = {k: statistics.median(v) for k, v in sides.items()}
    cpu_median = {k: statistics.median(v) for k, v in cpu.items()}
    cost = _emit_cost()
    per_call = events / max(1, args.rounds * (per_slice * args.slices + warm_up))  # of the jsonl side
    traced = names[1:]
    full_rate = (
        {
            "events_per_call": round(per_call, 2),
            "cpu_share_at_off_rate": round(cost["cpu_us_per_event"] * per_call * median["off"] / 1e6, 4),
        }
        if "jsonl" in names
        else {}
    )
    return {
        **cost,
        **full_rate,
        "url": args.url,
        "calls_per_round": args.calls,
        "concurrency": args.concurrency,
        "sample_rate": args.sample,
        **{f"{k}_calls_per_s": round(v) for k, v in median.items()},
        **{f"overhead_{_key(side)}": round(1 - median[side] / median["off"], 4) for side in traced},
        # the same, as the median of each round's own ratio (side and off measured back to back): steadier
        # when the machine's load drifts between rounds
        **{
            f"overhead_{_key(side)}_per_round": round(
                statistics.median(1 - x / o for x, o in zip(sides[side], sides["off"], strict=True)), 4
            )
            for side in traced
        },
        "events_written": events,
        # this process's CPU per call (caller, server and tracing: one Python process), median of rounds,
        # and what tracing adds to it: steadier than calls/s on a shared machine, and what the calls/s
        # overhead comes to when this process is the bottleneck
        **{f"{k}_cpu_us_per_call": round(v, 1) for k, v in cpu_median.items()},
        **{
            f"cpu_overhead_{_key(side)}": round(cpu_median[side] / cpu_median["off"] - 1, 4)
            for side in traced
        },
        **{
            f"cpu_overhead_{_key(side)}_per_round": round(
                statistics.median(x / o - 1 for x, o in zip(cpu[side], cpu["off"], strict=True)), 4
            )
            for side in traced
        },
    }


def main() -> None:
    """Run the rounds and print the result as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--slices", type=int, default=10, help="turns each side takes per round")
    parser.add_argument(
        "--sides",
        choices=("all", "full", "sampled"),
        default="all",
        help="the traced sides to run: every one, only those at full rate, or only the sampled ones",
    )
    parser.add_argument(
        "--sample", type=float, default=0.05, help="the rate of the sampled sides (GEAR_TRACE_SAMPLE)"
    )
    print(json.dumps(asyncio.run(_main(parser.parse_args())), indent=2))


if __name__ == "__main__":
    main()

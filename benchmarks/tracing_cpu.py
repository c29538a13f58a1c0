"""Benchmark: CPU per traced call on the emit path, without a broker (steady on a shared machine).

    python benchmarks/tracing_cpu.py [--calls 20000] [--sample 0.05] [off jsonl otel-api otel spans sdk-same
        sdk-bare jsonl-sampled otel-sampled]

Drives both sides' typed emitters through the events of one call (client span, publish, confirm,
deliver, server span, the reply's publish and confirm, reply sent, settle, response) with:

* ``off``: no events, no spans;
* ``jsonl``: JSONL files (the writer thread's encoding and I/O included);
* ``otel-api``: JSONL plus the OpenTelemetry bridge over the API's no-op spans (extra installed, no SDK);
* ``otel``: JSONL plus spans recorded by the SDK (``BatchSpanProcessor``, an exporter that drops them);
* ``spans``: the spans of ``otel`` alone (no JSONL): Gear's span path with the SDK;
* ``sdk-bare``: the same three spans per call made directly with the SDK (client, its publish attempt,
  the server span under the client's context; ``start_span`` and ``end`` only, no headers, attributes
  or context switches): what the SDK costs by itself;
* ``sdk-same``: those spans with what Gear asks of the API besides (the same attributes, W3C inject and
  extract, the server span made current), made directly: ``spans - sdk-same`` is Gear's own Python;
* ``jsonl-sampled``, ``otel-sampled``: ``jsonl`` and ``otel`` with both emitters sampling at ``--sample``
  (and the SDK at ``parentbased_traceidratio`` at that rate); each call is a trace of its own.

Prints, per side, the CPU microseconds per call on the calling thread and in the whole process. Unlike
call throughput, CPU time barely moves with other jobs on the machine; multiply by the call rate to get
the share of a core tracing costs.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from typing import Any

from _trace_fakes import Delivery, Meta, Msg, sdk_provider

from gear.tracing import Emitter, JsonlTracer, NullTracer, Resource, Settlement, Tracer, TraceSampler
from gear.tracing.spans import NO_SPANS, Spans

__all__ = ("main",)


_SPREAD = 0x9E3779B97F4A7C15F39CC0605CEDC835
"""An odd 128-bit constant: ``i * _SPREAD`` spreads consecutive call numbers over the trace-id space."""


def _one_call(client: Emitter, server: Emitter, i: int) -> None:
    rid = f"{i:016x}"
    trace = f"{i * _SPREAD % (1 << 128):032x}"  # a trace per call, as the SDK makes them
    request = Msg(request_id=rid, deadline_unix=time.time() + 5, trace_id=trace)
    span = client.client_span(request, "REPO.r1")
    client.publish(request, f"{rid}.1", 1)
    client.confirmed(request, f"{rid}.1", 1)
    delivery, meta = Delivery(headers=request.headers), Meta(request_id=rid, trace_id=trace)
    server.deliver(delivery, meta)
    with server.server_span(delivery, meta, delivery.headers):
        reply = Msg(routing_key="WEB.w1", request_id=rid, kind="gear.reply", trace_id=trace)
        server.publish(reply, f"{rid}.r", 1)
        server.confirmed(reply, f"{rid}.r", 1)
        server.reply_sent(meta, True, 0.001)
    server.settle(delivery, meta, Settlement.ACK)
    client.response(rid, request.trace_id, "put", "REPO.r1", 0.002, True)
    span.end()


def _sdk_spans(sample: float = 1.0) -> Spans:
    from gear.tracing.otel import OtelSpans

    return OtelSpans(sdk_provider(sample))


def _bare_sdk(calls: int, full: bool) -> float:
    """CPU per call of three spans made with the SDK directly: client, its publish attempt under it,
    the server span under the client's context. ``full``: with what Gear asks of the API besides (the
    same attributes, W3C inject into headers and extract from them, the server span made current)."""
    from opentelemetry import context, propagate, trace
    from opentelemetry.trace import SpanKind

    tracer = sdk_provider().get_tracer("bare")
    client_attrs = {"rpc.system.name": "gear", "rpc.method": "REPO/put", "service.peer.name": "REPO"}
    client_attrs |= {"messaging.system": "rabbitmq", "gear.request.id": "ab" * 8}
    attempt_attrs: dict[str, str | int] = {"messaging.system": "rabbitmq", "messaging.operation.type": "send"}
    attempt_attrs |= {"messaging.operation.name": "publish", "gear.attempt": 1}
    attempt_attrs |= {"messaging.rabbitmq.destination.routing_key": "REPO.r1", "messaging.message.id": "a.1"}
    server_attrs = {
        "rpc.system.name": "gear",
        "rpc.method": "REPO/put",
        "messaging.operation.type": "process",
    }
    server_attrs |= {"messaging.destination.name": "gear:REPO.r1:REPO.r1", "gear.request.id": "ab" * 8}
    server_attrs |= {"gear.caller": "WEB.w1"}

    def bare() -> None:
        client = tracer.start_span("REPO/put", kind=SpanKind.CLIENT)
        parent = trace.set_span_in_context(client)
        tracer.start_span("publish REPO.r1", parent, SpanKind.PRODUCER).end()
        tracer.start_span("REPO/put", parent, SpanKind.SERVER).end()
        client.end()

    def same() -> None:
        client = tracer.start_span("REPO/put", kind=SpanKind.CLIENT, attributes=client_attrs)
        parent = trace.set_span_in_context(client)
        headers: dict[str, Any] = {}
        propagate.inject(headers, context=parent)
        attempt = tracer.start_span("publish REPO.r1", parent, SpanKind.PRODUCER, attempt_attrs)
        attempt.set_attribute("gear.amqp.outcome", "confirm")
        attempt.end()
        extracted = propagate.extract(headers)
        server = tracer.start_span("REPO/put", extracted, SpanKind.SERVER, server_attrs)
        token = context.attach(trace.set_span_in_context(server))
        context.detach(token)
        server.end()
        client.end()

    one = same if full else bare
    for _ in range(min(2000, calls)):
        one()
    started = time.process_time()
    for _ in range(calls):
        one()
    return (time.process_time() - started) / calls * 1e6


def _api_spans() -> Spans:
    from gear.tracing.otel import OtelSpans

    return OtelSpans()


def _side(directory: str, jsonl: bool) -> Callable[[str], Tracer]:
    def make(type_: str) -> Tracer:
        if not jsonl:
            return NullTracer()
        ids = {"service.name": type_, "host.name": "h1", "service.instance.id": f"{type_}.h1"}
        return JsonlTracer(directory, Resource.model_validate(ids))

    return make


def _measure(jsonl: bool, spans: Callable[[], Spans], calls: int, sample: float = 1.0) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="gear-trace-cpu-") as directory:
        make = _side(directory, jsonl)
        client_tracer, server_tracer = make("WEB"), make("REPO")
        chosen = spans()
        sampler = TraceSampler(sample)
        client = Emitter(client_tracer, "WEB.w1", spans=chosen, sampler=sampler)
        server = Emitter(server_tracer, "REPO.r1", spans=chosen, sampler=sampler)
        for i in range(min(2000, calls)):  # warm up
            _one_call(client, server, i)
        process, thread = time.process_time(), time.thread_time()
        for i in range(calls):
            _one_call(client, server, i)
        thread = time.thread_time() - thread
        client_tracer.close()
        server_tracer.close()
        process = time.process_time() - process
    return thread / calls * 1e6, process / calls * 1e6


def main() -> None:
    """Measure the chosen sides and print one line each."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "sides",
        nargs="*",
        default=[
            "off",
            "jsonl",
            "otel-api",
            "otel",
            "spans",
            "sdk-same",
            "sdk-bare",
            "jsonl-sampled",
            "otel-sampled",
        ],
    )
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--sample", type=float, default=0.05, help="the rate of the *-sampled sides")
    args = parser.parse_args()
    rate = args.sample
    sides: dict[str, tuple[bool, Callable[[], Spans], float]] = {
        "off": (False, lambda: NO_SPANS, 1.0),
        "jsonl": (True, lambda: NO_SPANS, 1.0),
        "otel-api": (True, _api_spans, 1.0),
        "otel": (True, _sdk_spans, 1.0),
        "spans": (False, _sdk_spans, 1.0),
        "jsonl-sampled": (True, lambda: NO_SPANS, rate),
        "otel-sampled": (True, lambda: _sdk_spans(rate), rate),
    }
    for name in args.sides:
        if name in ("sdk-bare", "sdk-same"):
            cpu = _bare_sdk(args.calls, full=name == "sdk-same")
            print(f"{name:13s} calling thread {cpu:7.1f} µs CPU per call, process {cpu:7.1f} µs", flush=True)
            continue
        jsonl, spans, sample = sides[name]
        thread, process = _measure(jsonl, spans, args.calls, sample)
        print(
            f"{name:13s} calling thread {thread:7.1f} µs CPU per call, process {process:7.1f} µs", flush=True
        )


if __name__ == "__main__":
    main()

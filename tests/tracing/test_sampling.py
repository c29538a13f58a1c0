"""Head sampling (``GEAR_TRACE_SAMPLE``): a trace is recorded whole on every instance or not at all, by
OpenTelemetry's trace-id ratio rule; its context still travels; untraced events are always written."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest

import gear
from gear.tracing import Emitter, EventName, InMemoryTracer, TraceSampler
from gear.tracing.spans import NO_SPANS, using_spans
from tests.conftest import unique
from tests.fleet import Fleet, eventually


@pytest.fixture
def no_spans() -> Iterator[None]:
    with using_spans(NO_SPANS):
        yield


def _read_lines(directory: Path) -> list[str]:
    return [line for path in directory.glob("*.jsonl") for line in path.read_text().splitlines()]


def _trace_ids(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.getrandbits(128):032x}" for _ in range(n)]


@pytest.mark.parametrize("rate", [0.01, 0.05, 0.25, 0.5, 0.999])
def test_the_rule_is_opentelemetrys_trace_id_ratio(rate: float) -> None:
    """An SDK configured with ``traceidratio`` at the same rate keeps exactly the same traces."""
    sampling = pytest.importorskip("opentelemetry.sdk.trace.sampling")
    theirs = sampling.TraceIdRatioBased(rate)
    ours = TraceSampler(rate)
    ids = _trace_ids(4000, seed=int(rate * 1000))
    kept = [t for t in ids if ours.keeps(t)]
    assert kept == [t for t in ids if theirs.should_sample(None, int(t, 16), "x").decision.is_sampled()]
    assert 0 < len(kept) < len(ids)


def test_a_trace_gets_the_same_answer_every_time_it_is_asked() -> None:
    """The answer depends on the id alone (compared as text, it is the numeric rule to the last id)."""
    sampler = TraceSampler(0.3)
    ids = _trace_ids(10_000, seed=7)
    first = [sampler.keeps(t) for t in ids]
    assert first == [sampler.keeps(t) for t in reversed(ids)][::-1]
    assert first == [int(t[16:], 16) < round(0.3 * 2**64) for t in ids]
    bound = round(0.3 * 2**64)
    below, at = (f"{0xABC:016x}{low:016x}" for low in (bound - 1, bound))
    assert sampler.keeps(below)
    assert not sampler.keeps(at)


def test_a_late_reply_goes_with_its_call() -> None:
    """A reply carries no trace id; a late one is kept or dropped as its call was."""
    sampler = TraceSampler(0.5)
    kept, dropped = (
        next(t for t in _trace_ids(100, seed=3) if sampler.keeps(t) is want) for want in (True, False)
    )
    tracer = InMemoryTracer()
    emitter = Emitter(tracer, "WEB.w1", spans=NO_SPANS, sampler=sampler)
    emitter.timeout("a" * 16, kept, "get", "REPO", 1.0)
    emitter.response("b" * 16, dropped, "get", "REPO.r1", 0.01, True)
    emitter.late_reply("a" * 16, "get", "REPO.r1")
    emitter.late_reply("b" * 16, "get", "REPO.r1")
    emitter.late_reply("c" * 16, "get", "REPO.r1")  # a call it knows nothing of: kept, a sign of trouble
    late = tracer.named(EventName.LATE_REPLY)
    assert [(e.span_id, e.trace_id) for e in late] == [("a" * 16, kept), ("c" * 16, None)]


def test_events_outside_any_trace_are_always_kept() -> None:
    sampler = TraceSampler(1e-9)
    assert sampler.keeps(None)
    assert not sampler.keeps("f" * 32)
    assert TraceSampler(1.0).keeps("f" * 32)


def test_a_foreign_trace_id_is_decided_alike_everywhere_and_rate_1_keeps_it() -> None:
    foreign = ["not-hex-at-all", "ABCDEF0123456789ABCDEF0123456789", "12", "", "\u00e9" * 40]
    for rate in (0.01, 0.5):
        one, other = TraceSampler(rate), TraceSampler(rate)  # two instances
        assert [one.keeps(t) for t in foreign] == [other.keeps(t) for t in foreign]
    assert all(TraceSampler(1.0).keeps(t) for t in foreign)


@pytest.mark.parametrize("rate", [0.0, -0.5, 1.5, float("nan")])
def test_a_rate_outside_0_to_1_is_refused(rate: float, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="sample rate"):
        TraceSampler(rate)
    monkeypatch.setenv("GEAR_TRACE_SAMPLE", str(rate))
    with pytest.raises(pydantic.ValidationError, match="trace_sample"):
        gear.Settings()


async def test_a_trace_is_recorded_on_every_instance_or_on_none(fleet: Fleet, no_spans: None) -> None:
    """WEB -> CTRL -> REPO at rate 0.5: each instance records exactly the traces the rule keeps, each of
    them whole; the nested call stays in its caller's trace."""
    rate = 0.5
    tracers = {name: InMemoryTracer() for name in ("WEB", "CTRL", "REPO")}
    repo, ctrl = unique("REPO"), unique("CTRL")
    repo_svc = fleet.service(repo, "r1", tracer=tracers["REPO"], trace_sample=rate)
    ctrl_svc = fleet.service(ctrl, "c1", tracer=tracers["CTRL"], trace_sample=rate)
    web = fleet.service(unique("WEB"), "w1", serve=False, tracer=tracers["WEB"], trace_sample=rate)
    seen: list[str] = []

    @repo_svc.handler("get")
    async def get(key: str) -> str:
        return key.upper()

    @ctrl_svc.handler("lookup")
    async def lookup(key: str) -> str:
        request = gear.current_request()
        assert request is not None
        assert request.trace_id is not None
        seen.append(request.trace_id)
        result: str = await ctrl_svc.rpc.call(f"{repo}.r1", "get", key)
        return result

    await fleet.start()
    for n in range(40):
        assert await web.rpc.call(f"{ctrl}.c1", "lookup", f"k{n}") == f"K{n}"
    kept = {t for t in seen if TraceSampler(rate).keeps(t)}
    assert 0 < len(kept) < len(seen) == 40  # all or none of 40 fair coins: 2**-39

    def settled() -> bool:
        return (
            len(tracers["REPO"].named(EventName.SETTLE))
            == len(kept)
            == len(tracers["CTRL"].named(EventName.SETTLE))
        )

    await eventually(settled, what="a settle event per kept trace on CTRL and REPO")
    per_trace: dict[str, list[str]] = defaultdict(list)
    for name, tracer in tracers.items():
        for event in tracer.events:
            assert event.trace_id is not None
            per_trace[event.trace_id].append(f"{name} {event.event_name}")
    assert set(per_trace) == kept
    whole = sorted(per_trace[next(iter(kept))])
    assert all(sorted(events) == whole for events in per_trace.values())
    assert whole.count("WEB gear.rpc.response") == whole.count("CTRL gear.rpc.response") == 1
    assert whole.count("CTRL gear.deliver") == whole.count("REPO gear.deliver") == 1


async def test_sampled_jsonl_files_carry_the_rate(fleet: Fleet, no_spans: None, tmp_path: Path) -> None:
    """The rate is in every line's resource (what the pipeline scales counts by); the files hold exactly
    the traces the rule keeps, and lines of other traces are absent."""
    rate = 0.25
    repo = unique("REPO")
    server = fleet.service(repo, "r1", trace=str(tmp_path), trace_sample=rate)
    caller = fleet.service(unique("WEB"), "w1", serve=False, trace=str(tmp_path), trace_sample=rate)
    seen: list[str] = []

    @server.handler("ping")
    async def ping(_: Any = None) -> str:
        request = gear.current_request()
        assert request is not None
        assert request.trace_id is not None
        seen.append(request.trace_id)
        return "pong"

    sampler = TraceSampler(rate)

    def kept() -> set[str]:
        return {t for t in seen if sampler.keeps(t)}

    await fleet.start()
    # Calls go on until the rule has kept one trace and dropped another (random ids: a fixed count of
    # calls would now and then see all of them dropped); 400 calls all alike is 0.75**400 unlikely.
    while len(seen) < 400 and not 0 < len(kept()) < len(seen):
        assert await caller.rpc.call(f"{repo}.r1", "ping") == "pong"
    assert 0 < len(kept()) < len(seen)
    await fleet.stop()  # closes the tracers: everything queued is written
    lines = [json.loads(line) for line in _read_lines(tmp_path)]
    assert {line["resource"]["gear.trace.sample_rate"] for line in lines} == {rate}
    assert {line["trace_id"] for line in lines if "trace_id" in line} == kept()


async def test_a_dropped_trace_gets_no_spans_but_its_context_travels(fleet: Fleet) -> None:
    """With an SDK, Gear makes no spans for a trace it drops; the application's trace context still
    reaches the handler, so the handler's own spans join the application's trace."""
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from gear.tracing.otel import OtelSpans

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    app = provider.get_tracer("test-app")
    with using_spans(OtelSpans(provider)):
        repo = unique("REPO")
        server = fleet.service(repo, "r1", trace_sample=1e-9)
        web = fleet.service(unique("WEB"), "w1", serve=False, trace_sample=1e-9)

        @server.handler("get")
        async def get(_: Any = None) -> int:
            with app.start_as_current_span("handler.work") as own:
                return own.get_span_context().trace_id

        await fleet.start()
        with app.start_as_current_span("GET /x") as http:
            handler_trace = await web.rpc.call(f"{repo}.r1", "get")
    provider.shutdown()
    assert handler_trace == http.get_span_context().trace_id
    assert sorted(s.name for s in spans.get_finished_spans()) == ["GET /x", "handler.work"]

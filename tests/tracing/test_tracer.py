"""JSONL tracer: model round trip, coercion, rotation, failures logged once, the factory."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gear.tracing import (
    Attr,
    Emitter,
    EventName,
    InMemoryTracer,
    JsonlTracer,
    NullTracer,
    Resource,
    TraceEvent,
    tracer_from_env,
)
from gear.tracing.event import ATTRIBUTE_TYPES, coerce_attributes

RESOURCE = Resource.model_validate(
    {"service.name": "WEB", "host.name": "h1", "service.instance.id": "WEB.h1.abc", "process.pid": 7}
)


def _lines(directory: Path) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for path in sorted(directory.glob("*.jsonl")):
        out.extend(json.loads(line) for line in path.read_text().splitlines())
    return out


def test_every_attr_key_is_in_the_model() -> None:
    keys = {v for k, v in vars(Attr).items() if k.isupper()}
    assert keys == set(ATTRIBUTE_TYPES)


def test_lines_validate_against_the_model(tmp_path: Path) -> None:
    tracer = JsonlTracer(tmp_path, RESOURCE)
    tracer.emit(
        EventName.PUBLISH,
        trace_id="a" * 32,
        span_id="b" * 16,
        attributes={Attr.MESSAGE_ID: "m1", Attr.ATTEMPT: 1, Attr.TIMEOUT_MS: 5000, Attr.ROUTE: "type"},
    )
    tracer.emit(EventName.BLOCKED, attributes={Attr.BLOCKED_REASON: "low on memory"})
    tracer.close()
    rows = _lines(tmp_path)
    assert [r["event.name"] for r in rows] == ["gear.publish", "gear.connection.blocked"]
    events = [TraceEvent.model_validate(r) for r in rows]
    assert events[0].attributes.timeout_ms == 5000.0
    assert events[0].resource.instance_id == "WEB.h1.abc"
    assert events[0].seq == 1
    assert events[1].seq == 2
    assert isinstance(rows[0]["time_unix_nano"], int)
    assert (tmp_path / "WEB.h1.WEB.h1.abc.00000.jsonl").exists()


def test_coercion_keeps_types_strict() -> None:
    out = coerce_attributes(
        {Attr.ATTEMPT: "2", Attr.REDELIVERED: "yes", Attr.DURATION_MS: 3, "x.custom": [1], Attr.ROUTE: None}
    )
    assert out == {
        Attr.ATTEMPT: 2,
        f"gear.invalid.{Attr.REDELIVERED}": "yes",
        Attr.DURATION_MS: 3.0,
        "x.custom": "[1]",
    }


def test_rotation_by_size(tmp_path: Path) -> None:
    tracer = JsonlTracer(tmp_path, RESOURCE, max_bytes=2000)
    for i in range(100):
        tracer.emit(EventName.DELIVER, span_id=f"{i:016x}")
    tracer.close()
    files = sorted(tmp_path.glob("*.jsonl"))
    assert len(files) > 3
    assert all(f.stat().st_size <= 2000 for f in files)
    assert [r["span_id"] for r in _lines(tmp_path)] == [f"{i:016x}" for i in range(100)]
    again = JsonlTracer(tmp_path, RESOURCE, max_bytes=2000)
    again.emit(EventName.DELIVER)
    again.close()
    assert again.sink.paths[0].name.endswith(f"{len(files):05d}.jsonl")


def test_unwritable_directory_logs_once_and_never_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    tracer = JsonlTracer(blocker / "traces", RESOURCE)
    with caplog.at_level(logging.WARNING, logger="gear.tracing"):
        for _ in range(3):
            tracer.emit(EventName.PUBLISH)
            tracer.flush()
        tracer.close()
    warnings = [r for r in caplog.records if r.name == "gear.tracing"]
    assert len(warnings) == 1
    assert tracer.sink.dropped == 3


def test_overflow_drops_instead_of_growing(tmp_path: Path) -> None:
    tracer = JsonlTracer(tmp_path, RESOURCE, max_pending=5, flush_interval=60)
    for _ in range(10):
        tracer.emit(EventName.PUBLISH)
    assert tracer.overflowed >= 5
    tracer.close()


def test_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEAR_TRACE", raising=False)
    assert isinstance(tracer_from_env("WEB", "h1", "i1"), NullTracer)
    monkeypatch.setenv("GEAR_TRACE", "off")
    assert isinstance(tracer_from_env("WEB", "h1", "i1"), NullTracer)
    monkeypatch.setenv("GEAR_TRACE", str(tmp_path / "env"))
    tracer = tracer_from_env("WEB", "h1", "i1")
    assert isinstance(tracer, JsonlTracer)
    assert tracer.enabled
    tracer.emit(EventName.RECONNECT)
    tracer.close()
    assert _lines(tmp_path / "env")[0]["resource"] == {
        "service.name": "WEB",
        "host.name": "h1",
        "service.instance.id": "i1",
        "process.pid": os.getpid(),
    }
    explicit = tracer_from_env("WEB", "h1", "i2", directory=tmp_path / "arg")
    explicit.close()
    assert isinstance(explicit, JsonlTracer)


def test_in_memory_tracer() -> None:
    tracer = InMemoryTracer(RESOURCE)
    tracer.emit(EventName.TIMEOUT, span_id="s", attributes={Attr.TIMEOUT_MS: 10})
    assert tracer.named(EventName.TIMEOUT)[0].attributes.timeout_ms == 10.0


def test_in_memory_tracer_keeps_why_a_connection_was_lost() -> None:
    tracer = InMemoryTracer(RESOURCE)
    Emitter(tracer, "WEB.w1").connection_lost("heartbeat: nothing received for 7.5 s")
    lost = tracer.named(EventName.CONNECTION_LOST)[0]
    assert lost.attributes.exception_message == "heartbeat: nothing received for 7.5 s"


def test_sdk_never_imports_pyspark() -> None:
    code = (
        "import sys, gear, gear.tracing, gear.pipeline\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j'))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_analyze_without_pyspark_says_how_to_install(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.modules['pyspark'] = None\n"
        "from gear.pipeline import SparkMissingError, run_analyze\n"
        "try:\n"
        f"    run_analyze({str(tmp_path)!r}, {str(tmp_path / 'out')!r})\n"
        "except SparkMissingError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "PySpark is not installed: pip install 'gear-rpc[spark]'"


def test_full_disk_logs_once_and_never_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("needs /dev/full")
    from gear.tracing.sink import RotatingFileSink

    tracer = JsonlTracer(tmp_path, RESOURCE, flush_interval=3600)
    monkeypatch.setattr(RotatingFileSink, "_next_index", lambda self: 0)
    (tmp_path / "WEB.h1.WEB.h1.abc.00000.jsonl").symlink_to("/dev/full")
    with caplog.at_level(logging.WARNING, logger="gear.tracing"):
        for _ in range(3):
            tracer.emit(EventName.PUBLISH, attributes={Attr.ATTEMPT: 1})
            tracer.flush()
        tracer.close()
    assert len([r for r in caplog.records if r.name == "gear.tracing"]) == 1
    assert tracer.sink.dropped == 3
    assert tracer.sink.written == 0


def test_combine_hands_each_event_to_every_enabled_tracer() -> None:
    from gear.tracing import MultiTracer, combine

    first, second = InMemoryTracer(), InMemoryTracer()
    assert isinstance(combine(None, NullTracer()), NullTracer)
    assert combine(first, NullTracer()) is first
    both = combine(first, None, second)
    assert isinstance(both, MultiTracer)
    both.emit(EventName.BLOCKED, attributes={Attr.BLOCKED_REASON: "low on memory"})
    both.close()
    assert (
        [e.event_name for e in first.events]
        == [e.event_name for e in second.events]
        == ["gear.connection.blocked"]
    )


def test_emitter_events_follow_the_contract() -> None:
    from gear.tracing import Emitter, Settlement
    from gear.tracing.spans import NO_SPANS
    from tests.tracing.fakes import Delivered, Meta, Msg

    events = InMemoryTracer()
    emitter = Emitter(events, "REPO.r1", exchange="gx", spans=NO_SPANS)
    emitter.publish(Msg(), "ab.2", 2, reason="return")
    emitter.deliver(Delivered(redelivered=True), Meta(), duplicate=True)
    emitter.settle(Delivered(redelivered=True), Meta(), Settlement.NACK, requeue=True)
    republish, deliver, settle = events.events
    assert republish.event_name == "gear.publish.republish"
    assert republish.attributes.republish_reason == "return"
    assert republish.attributes.destination == "gx:REPO.r1"
    assert (deliver.event_name, deliver.attributes.duplicate, deliver.attributes.redelivered) == (
        "gear.deliver", True, True,
    )  # fmt: skip
    assert deliver.parent_span_id == "ef" * 8
    assert deliver.attributes.destination == "gx:REPO.r1:REPO.r1"
    assert (settle.attributes.operation_name, settle.attributes.requeue) == ("nack", True)
    assert settle.span_id == deliver.span_id == "ab" * 8

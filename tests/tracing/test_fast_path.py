"""The JSONL tracer's fast path (layouts pasted into per-layout line encoders) writes exactly the lines the
JSON encoder writes for the same events, odd values included."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Unpack

import pytest

from gear.tracing import Emitter, EventName, JsonlTracer, Resource, Settlement, TraceEvent
from gear.tracing.api import EventAttrs, SpanIds
from gear.tracing.spans import NO_SPANS
from tests.tracing.fakes import Delivered, Meta, Msg

RESOURCE = Resource.model_validate(
    {"service.name": "REPO", "host.name": "r1", "service.instance.id": "REPO.r1.x", "process.pid": 7}
)


class DictOnly:
    """A tracer without ``record``: the emitter hands it attribute dicts (the JSON encoder's path)."""

    enabled = True

    def __init__(self, inner: JsonlTracer) -> None:
        self.inner = inner

    def emit(self, name: EventName, *, attributes: EventAttrs | None = None, **ids: Unpack[SpanIds]) -> None:
        self.inner.emit(name, attributes=attributes, **ids)

    def close(self) -> None:
        self.inner.close()


def _every_event(emitter: Emitter, odd: str) -> None:
    """Each emitter method, some more than once with other values; ``odd`` goes into string values."""
    request = Msg(method=f"put{odd}", deadline_unix=4102444800.0)
    reply = Msg(routing_key="WEB.w1", kind="gear.reply", parent_id="12" * 8)
    cast = Msg(kind="gear.cast", trace_id=None)
    delivered, meta = Delivered(), Meta(sender=f"WEB.w1{odd}")
    for msg in (request, reply, cast):
        emitter.publish(msg, "ab.1", 1)
        emitter.returned(msg, "ab.1", 1)
        emitter.publish(msg, "ab.2", 2, reason="return")
        emitter.publish(msg, "ab.3", 3)  # no reason
        emitter.nacked(msg, "ab.3", 3)
        emitter.confirmed(msg, "ab.3", 3)
    emitter.response("ab" * 8, "cd" * 16, "put", "REPO.r1", 0.0123456, True)
    emitter.response("ab" * 8, None, "put", "REPO.r1", 1.5, False)
    emitter.timeout("ab" * 8, "cd" * 16, "put", "REPO.*", 5)
    emitter.late_reply("ab" * 8, "put", "REPO.r1")
    emitter.unroutable("ab" * 8, "cd" * 16, "put", "NOPE", 4)
    emitter.deliver(delivered, meta)
    emitter.deliver(Delivered(redelivered=True, message_id=None), Meta(parent_id=None), duplicate=True)
    emitter.settle(delivered, meta, Settlement.ACK)
    emitter.settle(delivered, meta, Settlement.NACK, requeue=True)
    emitter.rejected_foreign(delivered, f"not json{odd}")
    emitter.expired(delivered, meta)
    emitter.cancelled(delivered, meta)
    emitter.reply_sent(meta, True, 0.25)
    emitter.reply_sent(meta, False)
    emitter.reply_unroutable(meta)
    emitter.connection_lost(f"reset{odd}")
    emitter.reconnected(2, 1.25)
    emitter.blocked("low on memory")
    emitter.unblocked()


def _lines(directory: Path) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(directory.glob("*.jsonl")):
        for line in path.read_text("utf-8").split("\n")[:-1]:  # not splitlines(): U+2028 is no line end
            row = json.loads(line)
            row.pop("time_unix_nano")
            timeout = row["attributes"].pop("gear.timeout_ms", 0.0)  # counted down from the emit time
            assert isinstance(timeout, float)
            rows.append(row)
    return rows


def _written(tmp_path: Path, name: str, wrap: Callable[[JsonlTracer], Any], odd: str) -> list[dict[str, Any]]:
    tracer = JsonlTracer(tmp_path / name, RESOURCE, flush_interval=3600)
    _every_event(Emitter(wrap(tracer), "REPO.r1", spans=NO_SPANS), odd)
    tracer.close()
    assert tracer.sink.dropped == 0
    return _lines(tmp_path / name)


@pytest.mark.parametrize("odd", ["", 'a "quoted" \\ name', "new\nline\ttab\x00", "ünïcødé ✓", "\u2028"])
def test_fast_lines_equal_the_encoders(tmp_path: Path, odd: str) -> None:
    fast = _written(tmp_path, "fast", lambda t: t, odd)
    slow = _written(tmp_path, "slow", DictOnly, odd)
    assert len(fast) == 37
    assert fast == slow
    for row in fast:
        TraceEvent.model_validate({**row, "time_unix_nano": 1})


def test_text_is_byte_for_byte_the_encoders(tmp_path: Path) -> None:
    """Not only the same values: the same text (key order, number formats), time aside."""
    texts = {}
    for name, wrap in (("fast", lambda t: t), ("slow", DictOnly)):
        tracer = JsonlTracer(tmp_path / name, RESOURCE, flush_interval=3600)
        _every_event(Emitter(wrap(tracer), "REPO.r1", spans=NO_SPANS), "")
        tracer.close()
        text = "".join(p.read_text("utf-8") for p in sorted((tmp_path / name).glob("*.jsonl")))
        texts[name] = [
            re.sub(r'"gear.timeout_ms":[0-9.]+', "", line.split(",", 1)[1]) for line in text.split("\n")[:-1]
        ]
    assert texts["fast"] == texts["slow"]


def test_wrong_types_and_lone_surrogates_go_through_the_encoder(tmp_path: Path) -> None:
    tracer = JsonlTracer(tmp_path, RESOURCE, flush_interval=3600)
    emitter = Emitter(tracer, "REPO.r1", spans=NO_SPANS)
    emitter.deliver(Delivered(), Meta(attempt=True))  # a forged header (bool is an int to mypy)
    emitter.deliver(Delivered(delivery_tag="7"), Meta())  # type: ignore[arg-type]
    emitter.reply_sent(Meta(), True, float("inf"))
    emitter.deliver(Delivered(), Meta(method="bad\udc80"))  # cannot be UTF-8: the line is dropped
    emitter.deliver(Delivered(), Meta())
    tracer.close()
    rows = _lines(tmp_path)
    assert rows[0]["attributes"]["gear.invalid.gear.attempt"] == "True"
    assert rows[1]["attributes"]["messaging.rabbitmq.message.delivery_tag"] == 7
    assert rows[2]["attributes"]["gear.duration_ms"] is None
    assert [r["gear.event.seq"] for r in rows] == [1, 2, 3, 5]
    assert tracer.sink.dropped == 1


def test_plain_events_are_pasted_not_encoded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    encoded: list[int] = []
    generic = JsonlTracer._generic_line

    def counting(self: JsonlTracer, item: Any, seq: int) -> str:
        encoded.append(seq)
        return generic(self, item, seq)

    monkeypatch.setattr(JsonlTracer, "_generic_line", counting)
    _written(tmp_path, "fast", lambda t: t, "")
    # only the events with a missing value: three republishes without a reason, a delivery without id
    assert len(encoded) == 4


def test_combined_tracers_get_the_same_events(tmp_path: Path) -> None:
    from gear.tracing import InMemoryTracer, combine

    files, memory = JsonlTracer(tmp_path, RESOURCE, flush_interval=3600), InMemoryTracer(RESOURCE)
    _every_event(Emitter(combine(files, memory), "REPO.r1", spans=NO_SPANS), "")
    files.close()
    written = _lines(tmp_path)
    kept = [e.model_dump(by_alias=True, exclude_none=True) for e in memory.events]
    for row in kept:
        for key in ("time_unix_nano", "gear.event.seq", "severity_number"):  # the last one is not written
            row.pop(key)
        row["attributes"].pop("gear.timeout_ms", None)
    for row in written:
        row.pop("gear.event.seq")
    assert written == kept

"""Tracers: JSON lines on disk (``JsonlTracer``), a list in memory (``InMemoryTracer``), and the factory.

Theory of operation (``JsonlTracer``): events are queued on the event loop and encoded on a writer thread.
Queuing does as little as it can: the typed emitter calls :meth:`JsonlTracer.record` with a layout number
(:mod:`gear.tracing.layout`) and a tuple of the event's values, and the tracer appends one tuple of
primitives (time, layout, ids, values) to a ``deque`` (atomic under the GIL, no lock, no dict, no I/O);
plain :meth:`JsonlTracer.emit` queues its attribute dict the same way. A daemon writer thread wakes every
``flush_interval`` seconds (or sooner when ``batch_size`` events are pending) and encodes the whole batch:
one JSON encoder call over all its values tells whether any string needs escaping (almost never: ids,
names and routing keys are plain words); if none does, each line is one ``%``-format of its layout's
precomputed template (fixed attributes, key names and the instance's resource already JSON), otherwise
the events that need it go through the JSON encoder one by one. The lines are written in one chunk per
batch by a :class:`~gear.tracing.sink.RotatingFileSink`. If the buffer holds ``max_pending`` events
because the disk is slower than the service, new events are dropped and counted rather than growing
memory or slowing calls. ``close`` stops the thread and writes the rest.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any, Unpack

import pydantic_core

from gear.tracing.api import EventAttrs, EventName, NullTracer, SpanIds, Tracer
from gear.tracing.event import Resource, TraceEvent, coerce_attributes
from gear.tracing.layout import ID_FIELDS, LAYOUTS, SPECIAL, Encoder, UnfitError
from gear.tracing.sink import DEFAULT_MAX_BYTES, RotatingFileSink

__all__ = ("TRACE_ENV", "InMemoryTracer", "JsonlTracer", "MultiTracer", "combine", "tracer_from_env")

TRACE_ENV = "GEAR_TRACE"
"""Environment variable naming the trace directory; unset, empty, ``0`` or ``off`` means tracing off."""

_OFF_VALUES = frozenset({"", "0", "off", "false", "no"})

_Record = tuple[int, int, str | None, str | None, str | None, Any]
"""A queued event: time, layout id (``-1``: an ``emit`` call), trace, span and parent span ids, and the
layout's values (for ``-1``: the event name and its attribute mapping)."""

_GENERIC = -1


_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str).encode


def _fast_dumps(value: Mapping[str, Any]) -> str:
    """Compact JSON, several times faster than ``json``."""
    return pydantic_core.to_json(value, fallback=str, inf_nan_mode="null").decode()


_SPECIAL = SPECIAL.encode()


def _pasted(text: str, expected: int) -> bytes | None:
    """``text`` (pasted lines) in UTF-8 if it has no backslash and exactly ``expected`` quotes and control
    characters (the lines' own quotes and newlines): then no pasted value needed JSON escaping, and the
    lines are what the JSON encoder would have written. ``None`` otherwise."""
    if "\\" in text:
        return None
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return None
    return data if len(data) - len(data.translate(None, _SPECIAL)) == expected else None


_NAMES = {str(name): f'"{name}"' for name in EventName}
"""Each event name as a JSON string, ready to paste."""

time_ns = time.time_ns


def _text(value: str) -> str:
    """A JSON string; ids and event names are plain words, so most need no escaping."""
    return f'"{value}"' if value.replace(".", "").isalnum() and value.isascii() else _dumps(value)


class JsonlTracer:
    """Writes events of one instance to size-rotated JSONL files, off the event loop."""

    enabled = True

    def __init__(
        self,
        directory: str | os.PathLike[str],
        resource: Resource,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        flush_interval: float = 0.25,
        batch_size: int = 2048,
        max_pending: int = 200_000,
    ) -> None:
        self.resource = resource
        stem = f"{resource.service_name}.{resource.host_name}.{resource.instance_id}"
        self.sink = RotatingFileSink(directory, stem, max_bytes)
        self.overflowed = 0
        """Events dropped because ``max_pending`` were already waiting."""
        self._resource_json = _dumps(resource.model_dump(by_alias=True, exclude_none=True))
        self._encoders: dict[int, tuple[Encoder, int]] = {}
        """Line encoders by ``layout id * 8 + id bits`` (trace id 1, span id 2, parent 4; an empty parent
        counts as none), made on first use."""
        self._drain_lock = threading.Lock()
        self._pending: deque[_Record] = deque()
        self._seq = 0
        """The last ``gear.event.seq`` given (by the writer, in queue order, under the drain lock)."""
        self._flush_interval = flush_interval
        self._batch_size = batch_size
        self._max_pending = max_pending
        self._wake = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"gear-trace-{stem}", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def record(
        self,
        layout: int,
        trace_id: str | None,
        span_id: str | None,
        parent_span_id: str | None,
        values: tuple[Any, ...],
    ) -> None:
        """Queue one event of layout number ``layout`` (see :mod:`gear.tracing.layout`) with its slot
        values. What the typed emitter calls; never raises and never blocks on I/O."""
        if self._closed:
            return
        pending = self._pending
        if len(pending) >= self._max_pending:
            self.overflowed += 1
            return
        pending.append((time_ns(), layout, trace_id, span_id, parent_span_id, values))
        if len(pending) == self._batch_size:
            self._wake.set()

    def emit(self, name: EventName, *, attributes: EventAttrs | None = None, **ids: Unpack[SpanIds]) -> None:
        """Queue one event. Never raises and never blocks on I/O.

        ``attributes`` is read later on the writer thread, not copied: pass a mapping you do not change
        afterwards.
        """
        self.record(
            _GENERIC, ids.get("trace_id"), ids.get("span_id"), ids.get("parent_span_id"), (name, attributes)
        )

    def _generic_line(self, item: _Record, seq: int) -> str:
        """A line through the JSON encoder: for ``emit`` calls and values that need escaping or coercion."""
        t, layout, trace_id, span_id, parent, payload = item
        if layout == _GENERIC:
            name, attrs = payload
        else:
            found = LAYOUTS[layout]
            name, attrs = found.name, found.attributes(payload)
        quoted = _NAMES.get(name) or _text(str(name))
        head = f'{{"time_unix_nano":{t},"event.name":{quoted},"gear.event.seq":{seq}'
        ids = ""
        if trace_id is not None:
            ids += f',"trace_id":{_text(trace_id)}'
        if span_id is not None:
            ids += f',"span_id":{_text(span_id)}'
        if parent:
            ids += f',"parent_span_id":{_text(parent)}'
        body = _fast_dumps(coerce_attributes(attrs)) if attrs else "{}"
        return f'{head}{ids},"resource":{self._resource_json},"attributes":{body}}}\n'

    def _encoder(self, key: int) -> tuple[Encoder, int]:
        layout, bits = divmod(key, 8)
        names = [name for n, name in enumerate(ID_FIELDS) if bits & (1 << n)]
        made = self._encoders[key] = LAYOUTS[layout].encoder(names, self._resource_json)
        return made

    def _encode(self, batch: list[_Record], careful: bool) -> tuple[list[str], list[int], int]:
        """The lines of a batch, numbering ``gear.event.seq`` on from the last one written.

        Quick (``careful`` false): lines are pasted by the layouts' encoders wherever the value types
        fit; also returns the positions of the lines the JSON encoder made, and how many
        :data:`~gear.tracing.layout.SPECIAL` characters the others have if no value needed escaping,
        for the caller to check. Careful: each pasted
        line is checked on its own, and made by the JSON encoder if it fails. A record that cannot be
        written at all is left out (and counted in ``sink.dropped`` by a careful pass).
        """
        encoders = self._encoders
        lines: list[str] = []
        generic: list[int] = []
        expected = 0
        seq = self._seq
        for item in batch:
            seq += 1
            t, layout, trace_id, span_id, parent, values = item
            try:
                if layout != _GENERIC:
                    key = (
                        layout * 8 + (trace_id is not None) + 2 * (span_id is not None) + (4 if parent else 0)
                    )
                    encode, special = encoders.get(key) or self._encoder(key)
                    try:
                        line = encode(t, seq, trace_id, span_id, parent, values)
                    except UnfitError:
                        pass
                    else:
                        if not careful:
                            lines.append(line)
                            expected += special
                            continue
                        if _pasted(line, special) is not None:
                            lines.append(line)
                            continue
                generic.append(len(lines))
                lines.append(self._generic_line(item, seq))
            except Exception:  # a bad attribute must never kill the writer thread
                if careful:
                    self.sink.dropped += 1
        return lines, generic, expected

    def _lines(self, batch: list[_Record]) -> tuple[list[str], bytes | None]:
        """Encode a batch: quickly if the text of all its pasted lines shows that no value needed
        escaping (one check over all of it), else carefully, line by line. Returns the lines and, when
        they were all pasted, their UTF-8 text."""
        lines, generic, expected = self._encode(batch, careful=False)
        made = set(generic)
        pasted = [line for n, line in enumerate(lines) if n not in made] if made else lines
        data = _pasted("".join(pasted), expected)
        if data is None or len(lines) != len(batch):
            lines, _, _ = self._encode(batch, careful=True)
            data = None
        elif made:
            data = None  # that text lacks the encoder's lines: the sink encodes the whole batch
        self._seq += len(batch)
        return lines, data

    def _drain(self) -> None:
        with self._drain_lock:
            pending = self._pending
            popleft = pending.popleft
            batch = [popleft() for _ in range(len(pending))]  # only this thread takes from the left
            if batch:
                self.sink.write(*self._lines(batch))

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(self._flush_interval)
            self._wake.clear()
            self._drain()

    def flush(self) -> None:
        """Write everything queued so far (from the calling thread). For tests and shutdown."""
        self._drain()

    def close(self) -> None:
        """Stop the writer thread, write what is queued and close the file. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        self._drain()
        self.sink.close()
        atexit.unregister(self.close)


class InMemoryTracer:
    """Keeps validated :class:`TraceEvent` objects in a list; for tests."""

    enabled = True

    def __init__(self, resource: Resource | None = None) -> None:
        self.resource = resource or Resource.model_validate(
            {"service.name": "TEST", "host.name": "localhost", "service.instance.id": "test"}
        )
        self.events: list[TraceEvent] = []
        self._seq = itertools.count(1)
        self._lock = threading.Lock()

    def emit(self, name: EventName, *, attributes: EventAttrs | None = None, **ids: Unpack[SpanIds]) -> None:
        """Validate and store one event (invalid attribute types are kept as ``gear.invalid.*``)."""
        record = {
            "time_unix_nano": time.time_ns(),
            "event.name": str(name),
            "gear.event.seq": next(self._seq),
            "trace_id": ids.get("trace_id"),
            "span_id": ids.get("span_id"),
            "parent_span_id": ids.get("parent_span_id") or None,
            "resource": self.resource,
            "attributes": coerce_attributes(dict(attributes or {})),
        }
        event = TraceEvent.model_validate(record)
        with self._lock:
            self.events.append(event)

    def named(self, name: EventName | str) -> list[TraceEvent]:
        """The events called ``name``, in emission order."""
        return [e for e in self.events if e.event_name == str(name)]

    def close(self) -> None:
        """Nothing to release."""


class MultiTracer:
    """Hands every event to several tracers (e.g. the demo's delivery counter and the JSONL files)."""

    enabled = True

    def __init__(self, tracers: list[Tracer]) -> None:
        self.tracers = tracers

    def emit(self, name: EventName, *, attributes: EventAttrs | None = None, **ids: Unpack[SpanIds]) -> None:
        """Emit to each tracer in turn (each one never raises)."""
        for tracer in self.tracers:
            tracer.emit(name, attributes=attributes, **ids)

    def record(
        self,
        layout: int,
        trace_id: str | None,
        span_id: str | None,
        parent_span_id: str | None,
        values: tuple[Any, ...],
    ) -> None:
        """Hand one event of a layout (see :meth:`JsonlTracer.record`) to each tracer: as it is to
        those that take layouts, as an attribute dict to the others."""
        for tracer in self.tracers:
            taker = getattr(tracer, "record", None)
            if taker is not None:
                taker(layout, trace_id, span_id, parent_span_id, values)
            else:
                found = LAYOUTS[layout]
                attrs = found.attributes(values)
                tracer.emit(
                    found.name,
                    trace_id=trace_id,
                    span_id=span_id,
                    parent_span_id=parent_span_id,
                    attributes=attrs,
                )

    def close(self) -> None:
        """Close each tracer."""
        for tracer in self.tracers:
            tracer.close()


def combine(*tracers: Tracer | None) -> Tracer:
    """One tracer for several: the enabled ones, a :class:`MultiTracer` when there are two or more, the
    one itself when there is one, and a :class:`NullTracer` when none is enabled."""
    active = [t for t in tracers if t is not None and t.enabled]
    if not active:
        return NullTracer()
    if len(active) == 1:
        return active[0]
    return MultiTracer(active)


def tracer_from_env(
    service_type: str,
    host: str,
    instance_id: str,
    directory: str | os.PathLike[str] | None = None,
    sample_rate: float = 1.0,
) -> Tracer:
    """The tracer for one service instance.

    ``directory`` wins; otherwise ``GEAR_TRACE`` names the directory. With neither (or a value of
    ``0``/``off``/``false``/``no``/empty) tracing is off and a :class:`NullTracer` is returned.
    ``sample_rate`` below 1 is written in the resource (the emitter does the sampling).
    ``GEAR_TRACE_MAX_BYTES`` overrides the rotation size. Never raises for an unwritable directory:
    the problem is logged once when the first events are written.
    """
    target = os.fspath(directory) if directory is not None else os.environ.get(TRACE_ENV, "")
    if target.strip().lower() in _OFF_VALUES:
        return NullTracer()
    resource = Resource.model_validate(
        {
            "service.name": service_type,
            "host.name": host,
            "service.instance.id": instance_id,
            "process.pid": os.getpid(),
            "gear.trace.sample_rate": sample_rate if sample_rate < 1.0 else None,
        }
    )
    max_bytes = DEFAULT_MAX_BYTES
    raw = os.environ.get("GEAR_TRACE_MAX_BYTES", "")
    if raw.isdigit() and int(raw) > 0:
        max_bytes = int(raw)
    return JsonlTracer(target, resource, max_bytes=max_bytes)

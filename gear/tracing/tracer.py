"""Tracers: JSON lines on disk (``JsonlTracer``), a list in memory (``InMemoryTracer``), and the factory.

Theory of operation (``JsonlTracer``): ``emit`` runs on the event loop, so it only stamps the time and a
sequence number and appends one tuple to a ``deque`` (atomic under the GIL, no lock, no I/O). A daemon
writer thread wakes every ``flush_interval`` seconds (or sooner when ``batch_size`` events are pending),
turns the tuples into JSON lines and hands them to a :class:`~gear.tracing.sink.RotatingFileSink`. If the
buffer holds ``max_pending`` events because the disk is slower than the service, new events are dropped
and counted rather than growing memory or slowing calls. ``close`` stops the thread and writes the rest.
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
from typing import Any

import pydantic_core

from gear.tracing.api import EventName, NullTracer, Tracer
from gear.tracing.event import Resource, TraceEvent, coerce_attributes
from gear.tracing.sink import DEFAULT_MAX_BYTES, RotatingFileSink

__all__ = ("TRACE_ENV", "InMemoryTracer", "JsonlTracer", "MultiTracer", "combine", "tracer_from_env")

TRACE_ENV = "GEAR_TRACE"
"""Environment variable naming the trace directory; unset, empty, ``0`` or ``off`` means tracing off."""

_OFF_VALUES = frozenset({"", "0", "off", "false", "no"})

_Pending = tuple[int, int, str, str | None, str | None, str | None, Mapping[str, Any] | None]


_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str).encode


def _fast_dumps(value: Mapping[str, Any]) -> str:
    """Compact JSON, several times faster than ``json`` (it runs for every event on the writer thread)."""
    return pydantic_core.to_json(value, fallback=str, inf_nan_mode="null").decode()


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
        self._drain_lock = threading.Lock()
        self._pending: deque[_Pending] = deque()
        self._seq = itertools.count(1)
        self._flush_interval = flush_interval
        self._batch_size = batch_size
        self._max_pending = max_pending
        self._wake = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"gear-trace-{stem}", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def emit(
        self,
        name: EventName,
        *,
        trace_id: str | None = None,
        span_id: str | None = None,
        parent_span_id: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        """Queue one event. Never raises and never blocks on I/O.

        ``attributes`` is read later on the writer thread, not copied: pass a mapping you do not change
        afterwards (the typed emitters build a fresh dict per event).
        """
        if self._closed:
            return
        pending = self._pending
        if len(pending) >= self._max_pending:
            self.overflowed += 1
            return
        pending.append((time_ns(), next(self._seq), name, trace_id, span_id, parent_span_id, attributes))
        if len(pending) >= self._batch_size:
            self._wake.set()

    def _line(self, item: _Pending) -> str:
        t, seq, name, trace_id, span_id, parent, attrs = item
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

    def _drain(self) -> None:
        with self._drain_lock:
            lines: list[str] = []
            pending = self._pending
            while pending:
                try:
                    item = pending.popleft()
                except IndexError:
                    break
                try:
                    lines.append(self._line(item))
                except Exception:  # a bad attribute must never kill the writer thread
                    self.sink.dropped += 1
            self.sink.write(lines)

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

    def emit(
        self,
        name: EventName,
        *,
        trace_id: str | None = None,
        span_id: str | None = None,
        parent_span_id: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        """Validate and store one event (invalid attribute types are kept as ``gear.invalid.*``)."""
        record = {
            "time_unix_nano": time.time_ns(),
            "event.name": str(name),
            "gear.event.seq": next(self._seq),
            "trace_id": trace_id,
            "span_id": span_id,
            "parent_span_id": parent_span_id or None,
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

    def emit(
        self,
        name: EventName,
        *,
        trace_id: str | None = None,
        span_id: str | None = None,
        parent_span_id: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        """Emit to each tracer in turn (each one never raises)."""
        for tracer in self.tracers:
            tracer.emit(
                name, trace_id=trace_id, span_id=span_id, parent_span_id=parent_span_id, attributes=attributes
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
) -> Tracer:
    """The tracer for one service instance.

    ``directory`` wins; otherwise ``GEAR_TRACE`` names the directory. With neither (or a value of
    ``0``/``off``/``false``/``no``/empty) tracing is off and a :class:`NullTracer` is returned.
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
        }
    )
    max_bytes = DEFAULT_MAX_BYTES
    raw = os.environ.get("GEAR_TRACE_MAX_BYTES", "")
    if raw.isdigit() and int(raw) > 0:
        max_bytes = int(raw)
    return JsonlTracer(target, resource, max_bytes=max_bytes)

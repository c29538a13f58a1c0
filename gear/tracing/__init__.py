"""Trace events from a Gear instance (off by default).

Turn tracing on with ``GEAR_TRACE=/some/dir`` (or ``gear.Service(..., trace="/some/dir")``): each
instance then writes JSON lines to its own size-rotated files there. Build a tracer with
:func:`tracer_from_env`; :func:`combine` hands events to several tracers at once.
``GEAR_TRACE_SAMPLE=0.05`` records one trace in twenty, the same ones on every instance
(:class:`TraceSampler`).
This package never imports Spark; the analysis lives in ``gear.pipeline``.
"""

from __future__ import annotations

from gear.tracing.api import Attr, EventName, NullTracer, Settlement, SpanIds, Tracer
from gear.tracing.emitter import Emitter
from gear.tracing.event import Attributes, Resource, TraceEvent
from gear.tracing.sampling import TraceSampler
from gear.tracing.tracer import TRACE_ENV, InMemoryTracer, JsonlTracer, MultiTracer, combine, tracer_from_env

__all__ = (
    "TRACE_ENV",
    "Attr",
    "Attributes",
    "Emitter",
    "EventName",
    "InMemoryTracer",
    "JsonlTracer",
    "MultiTracer",
    "NullTracer",
    "Resource",
    "Settlement",
    "SpanIds",
    "TraceEvent",
    "TraceSampler",
    "Tracer",
    "combine",
    "tracer_from_env",
)

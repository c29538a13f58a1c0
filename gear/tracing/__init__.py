"""Trace events from a Gear instance (off by default)."""

from __future__ import annotations

from gear.tracing.api import EventName, NullTracer, Tracer

__all__ = ("EventName", "NullTracer", "Tracer")

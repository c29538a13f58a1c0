"""Head sampling by trace id: which traces an instance records.

Every instance decides from the trace id alone, so the instances a call crosses agree without telling
each other: a trace is kept when the lower 64 bits of its id, read as an unsigned integer, are below
``round(rate * 2**64)``. That is OpenTelemetry's ``TraceIdRatioBased`` rule, so an SDK configured with
``traceidratio`` at the same rate keeps the same traces (Gear's trace id is the OpenTelemetry one when
a call starts inside an instrumented request).

A kept trace is recorded whole; of a dropped one nothing is (no events, no spans; its trace context
still travels on). Events that belong to no trace (connection lost, blocked...) are always recorded.
The rate is written in each instance's resource (``gear.trace.sample_rate``) so the pipeline can scale
its counts back up.
"""

from __future__ import annotations

from typing import Final

__all__ = ("ALL", "TraceSampler")

_SPAN: Final = 1 << 64
_REMEMBERED: Final = 4096
"""Decisions kept for reuse, about the traces of the calls in flight; forgotten all at once past that."""


class TraceSampler:
    """Keeps the share ``rate`` (0 < rate <= 1) of traces, chosen by trace id."""

    __slots__ = ("_bound", "_seen", "everything", "rate")

    def __init__(self, rate: float = 1.0) -> None:
        """Raises ``ValueError`` unless ``0 < rate <= 1``."""
        if not 0.0 < rate <= 1.0:
            raise ValueError(f"a sample rate is a share in (0, 1], not {rate!r}")
        self.rate = rate
        self.everything = rate == 1.0
        """True when every trace is kept (the emitter then skips the check)."""
        self._bound = round(rate * _SPAN)
        self._seen: dict[str, bool] = {}
        """Recent decisions: a call asks about its trace about ten times, and a string's hash is kept
        in the string, so a lookup costs a fifth of parsing the id again."""

    def keeps(self, trace_id: str | None) -> bool:
        """Whether the trace ``trace_id`` (32 hex digits) is recorded. An event without a trace id, or
        with one that is not hex (a foreign sender's), is always kept."""
        if trace_id is None:
            return True
        seen = self._seen
        kept = seen.get(trace_id)
        if kept is None:
            try:
                kept = int(trace_id[-16:], 16) < self._bound
            except ValueError:
                kept = True
            if len(seen) >= _REMEMBERED:
                seen.clear()
            seen[trace_id] = kept
        return kept

    def __repr__(self) -> str:
        return f"TraceSampler({self.rate!r})"


ALL: Final = TraceSampler(1.0)
"""Keeps every trace: the default."""

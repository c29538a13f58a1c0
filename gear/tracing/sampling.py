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
_ABOVE_ALL: Final = chr(0x10FFFF) * 17
"""Text above any 16 characters: the cut of rate 1, which drops nothing."""


class TraceSampler:
    """Keeps the share ``rate`` (0 < rate <= 1) of traces, chosen by trace id."""

    __slots__ = ("_cut", "everything", "rate")

    def __init__(self, rate: float = 1.0) -> None:
        """Raises ``ValueError`` unless ``0 < rate <= 1``."""
        if not 0.0 < rate <= 1.0:
            raise ValueError(f"a sample rate is a share in (0, 1], not {rate!r}")
        self.rate = rate
        self.everything = rate == 1.0
        """True when every trace is kept (the emitter then skips the check)."""
        bound = round(rate * _SPAN)
        self._cut = f"{bound:016x}" if bound < _SPAN else _ABOVE_ALL
        """The bound as 16 lowercase hex digits: for ids in that form (W3C's, OpenTelemetry's and
        Gear's) comparing the text is comparing the numbers, without parsing them."""

    def drops(self, trace_id: str | None) -> bool:
        """Whether the trace ``trace_id`` (32 lowercase hex digits) is dropped. An event without a trace
        id is always kept; an id in another form is compared as text, so every instance still decides
        it alike."""
        return trace_id is not None and trace_id[-16:] >= self._cut

    def keeps(self, trace_id: str | None) -> bool:
        """Whether the trace ``trace_id`` is recorded: ``not drops(trace_id)``."""
        return not self.drops(trace_id)

    def __repr__(self) -> str:
        return f"TraceSampler({self.rate!r})"


ALL: Final = TraceSampler(1.0)
"""Keeps every trace: the default."""

"""A simulated service instance for the generator: a skewed clock and a JSONL file.

Times passed in are "true" nanoseconds; the instance adds its own skew when it writes, as a real node
with a wrong clock would. With a sample rate it writes the rate in its resource and only the events of
the traces :func:`selected` picks, plus every event without a trace id.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gear.tracing.api import EventName

__all__ = ("MS", "Instance", "selected")

MS = 1_000_000
"""One millisecond in nanoseconds."""

RATE_KEY = "gear.trace.sample_rate"
"""The resource attribute holding an instance's sample rate."""


def selected(trace_id: str, rate: float) -> bool:
    """Whether head sampling at ``rate`` records this trace (OpenTelemetry's TraceIdRatioBased rule:
    the trace id's lower 64 bits, as an integer, below ``round(rate * 2**64)``)."""
    return int(trace_id, 16) & (2**64 - 1) < round(rate * 2**64)


class Instance:
    """One simulated service instance and its trace file."""

    def __init__(
        self, directory: Path, type_: str, host: str, skew_ns: int, sample_rate: float | None = None
    ) -> None:
        self.type = type_
        self.host = host
        self.id = f"{type_}.{host}"
        self.skew_ns = skew_ns
        self.sample_rate = sample_rate
        self.resource: dict[str, Any] = {"service.name": type_, "host.name": host}
        self.resource["service.instance.id"] = self.id
        if sample_rate is not None:
            self.resource[RATE_KEY] = sample_rate
        self.path = directory / f"{type_}.{host}.{self.id}.00000.jsonl"
        self._seq = 0
        self._lines: list[str] = []
        self.count = 0

    def emit(
        self,
        t: int,
        name: EventName,
        span: str | None,
        trace: str | None,
        parent: str | None,
        attrs: dict[str, Any],
    ) -> None:
        """Write one event at true time ``t`` (the instance's skew is added) unless sampling drops it."""
        if trace and self.sample_rate is not None and not selected(trace, self.sample_rate):
            return
        self._seq += 1
        record: dict[str, Any] = {
            "time_unix_nano": t + self.skew_ns,
            "event.name": str(name),
            "gear.event.seq": self._seq,
        }
        if trace:
            record["trace_id"] = trace
        if span:
            record["span_id"] = span
        if parent:
            record["parent_span_id"] = parent
        record["resource"] = self.resource
        record["attributes"] = attrs
        self.raw(json.dumps(record, separators=(",", ":")))

    def raw(self, line: str) -> None:
        """Write one line as is."""
        self._lines.append(line + "\n")
        self.count += 1
        if len(self._lines) >= 20_000:
            self.flush()

    def flush(self) -> None:
        """Append buffered lines to the file."""
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.writelines(self._lines)
        self._lines.clear()

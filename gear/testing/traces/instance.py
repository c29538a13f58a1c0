"""A simulated service instance for the generator: a skewed clock and a JSONL file.

Times passed in are "true" nanoseconds; the instance adds its own skew when it writes, as a real node
with a wrong clock would.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gear.tracing.api import EventName

__all__ = ("MS", "Instance")

MS = 1_000_000
"""One millisecond in nanoseconds."""


class Instance:
    """One simulated service instance and its trace file."""

    def __init__(self, directory: Path, type_: str, host: str, skew_ns: int) -> None:
        self.type = type_
        self.host = host
        self.id = f"{type_}.{host}"
        self.skew_ns = skew_ns
        self.resource = {"service.name": type_, "host.name": host, "service.instance.id": self.id}
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
        """Write one event at true time ``t`` (the instance's skew is added)."""
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

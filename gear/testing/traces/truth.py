"""What the pipeline should find in generated traces, computed in plain Python from the call records.

The definitions here are the pipeline's, restated without Spark: a call's outcome, which calls count as
errors, nearest-rank percentiles on the caller's clock, duplicates per (instance, request id).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

__all__ = ("ERROR_OUTCOMES", "Call", "Truth", "nearest_rank")

ERROR_OUTCOMES = frozenset({"remote_error", "timeout", "unroutable", "nacked"})
"""Outcomes that count in a link's ``errors`` (Zipkin's ``errorCount``)."""


@dataclass
class Call:
    """One logical call (all attempts) as the generator made it."""

    caller: str
    caller_instance: str
    callee: str
    route: str
    method: str
    kind: str
    span_id: str
    outcome: str = "none"
    latency_ms: float | None = None
    returns: int = 0
    republishes: int = 0
    nacks: int = 0
    late: int = 0
    callee_types: set[str] = field(default_factory=set)
    handler_start: int | None = None


def nearest_rank(values: list[float], p: float) -> float:
    """The smallest value with at least ``p`` of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


@dataclass
class Truth:
    """Everything the generator knows, plus aggregates shaped like the pipeline's tables."""

    calls: list[Call] = field(default_factory=list)
    deliveries: Counter[tuple[str, str]] = field(default_factory=Counter)
    redelivered: Counter[str] = field(default_factory=Counter)
    requeued: Counter[str] = field(default_factory=Counter)
    blocked: list[tuple[str, str, float]] = field(default_factory=list)
    reconnects: list[tuple[str, float]] = field(default_factory=list)
    lines: int = 0
    corrupt: int = 0
    invalid_events: int = 0
    orphan_events: int = 0

    def links(self) -> dict[tuple[str, str], dict[str, int]]:
        """(caller, callee) -> calls, errors, remote_errors, timeouts, unroutable, nacked, late, none.

        A broadcast is one call to ``*``, like every call counted once (see :meth:`receivers`)."""
        out: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
        for call in self.calls:
            row = out[(call.caller, call.callee)]
            row["calls"] += 1
            row["errors"] += call.outcome in ERROR_OUTCOMES
            row["remote_errors"] += call.outcome == "remote_error"
            row["timeouts"] += call.outcome == "timeout"
            row["unroutable"] += call.outcome == "unroutable"
            row["nacked"] += call.outcome == "nacked"
            row["late_replies"] += call.late
            row["no_outcome"] += call.outcome == "none"
        return {k: dict(v) for k, v in out.items()}

    def receivers(self) -> dict[str, str]:
        """Caller TYPE -> the TYPEs its broadcasts reached, sorted and comma-joined."""
        reached: dict[str, set[str]] = defaultdict(set)
        for call in self.calls:
            if call.callee == "*":
                reached[call.caller] |= call.callee_types
        return {caller: ", ".join(sorted(types)) for caller, types in reached.items()}

    def outcomes(self) -> Counter[str]:
        """Calls per outcome."""
        return Counter(call.outcome for call in self.calls)

    def latency(self) -> dict[tuple[str, str, str], dict[str, float | None]]:
        """(callee, route, method) -> calls, answered, p50, p90, p99, max (milliseconds, caller's clock;
        None where no call was answered)."""
        calls: Counter[tuple[str, str, str]] = Counter()
        groups: dict[tuple[str, str, str], list[float]] = defaultdict(list)
        for call in self.calls:
            key = (call.callee, call.route, call.method)
            calls[key] += 1
            if call.latency_ms is not None:
                groups[key].append(call.latency_ms)
        out: dict[tuple[str, str, str], dict[str, float | None]] = {}
        for key, n in calls.items():
            values = groups.get(key, [])
            out[key] = {"calls": float(n), "answered": float(len(values))}
            for name, p in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
                out[key][name] = nearest_rank(values, p) if values else None
            out[key]["max"] = max(values) if values else None
        return out

    def route_rates(self) -> dict[tuple[str, str], dict[str, int]]:
        """(callee, route) -> calls, returns, republishes, republished calls and their outcome, ..."""
        out: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
        for call in self.calls:
            row = out[(call.callee, call.route)]
            row["calls"] += 1
            row["returns"] += call.returns
            row["republishes"] += call.republishes
            row["republished_calls"] += call.republishes > 0
            row["republish_ok"] += call.republishes > 0 and call.outcome == "ok"
            row["republish_failed"] += call.republishes > 0 and call.outcome != "ok"
            row["nacks"] += call.nacks
            row["timeouts"] += call.outcome == "timeout"
            row["remote_errors"] += call.outcome == "remote_error"
            row["unroutable"] += call.outcome == "unroutable"
        return {k: dict(v) for k, v in out.items()}

    def duplicates(self) -> dict[tuple[str, str], int]:
        """(instance, request id) -> deliveries, for requests delivered more than once to one instance."""
        return {key: n for key, n in self.deliveries.items() if n > 1}

    def no_outcome(self) -> int:
        """Calls that ended with nothing the caller could observe."""
        return sum(call.outcome == "none" for call in self.calls)

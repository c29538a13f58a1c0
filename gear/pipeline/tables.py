"""The tables the job writes: one definition of each table's columns, row order and report view.

The Spark side (:mod:`gear.pipeline.job`) writes each table with exactly :attr:`Table.columns` in that
order, sorted by :attr:`Table.order`; the report (:mod:`gear.pipeline.report`) shows :attr:`Table.shown`
under :attr:`Table.title`. This module imports nothing from Spark, so the report and the package's
entry point can use it without PySpark.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = (
    "BY_NAME",
    "CALL_DEFINITION",
    "COLUMNS",
    "ROUTE_FORMS",
    "ROUTE_NAMES",
    "TABLES",
    "TABLE_NAMES",
    "Table",
    "route_name",
)

CALL_DEFINITION = (
    "A call is one request a caller published (a call, a cast or a gather), counted once however often "
    "it was republished and however many instances received it; a broadcast (*.*) is one call to *. "
    "Every count on this page counts calls this way: the cards, the time axis, the graph and the tables."
)
"""What every table counts as a call, as the report states it."""

ROUTE_NAMES = MappingProxyType(
    {"type_host": "point-to-point", "type": "stateless", "type_all": "multicast", "all": "broadcast"}
)
"""The report's name of each ``gear.route`` value (``gear.base.address.Route``; the tables keep the value)."""

ROUTE_FORMS = MappingProxyType({"type_host": "TYPE.host", "type": "TYPE", "type_all": "TYPE.*", "all": "*.*"})
"""The address form of each route, for the report's legend."""


def route_name(route: object) -> str:
    """The human name of a ``gear.route`` value (``type_host`` -> ``point-to-point``); others as given."""
    text = "" if route is None else str(route)
    return ROUTE_NAMES.get(text, text)


@dataclass(frozen=True, slots=True)
class Table:
    """One output table."""

    name: str
    columns: tuple[str, ...]
    """Every column, in the order written."""
    order: tuple[str, ...] = ()
    """Row order of the written table."""
    title: str = ""
    """The report's heading; empty for a table the report shows in its own way."""
    shown: tuple[str, ...] = ()
    """The columns the report's table shows."""
    first: tuple[str, ...] = ()
    """The report puts the rows with the largest values of these columns first."""


TABLES: tuple[Table, ...] = (
    Table(
        "dependency_links",
        ("caller", "callee", "calls", "errors", "remote_errors", "timeouts", "unroutable", "nacked",
         "late_replies", "no_outcome", "receivers", "parent", "child", "callCount", "errorCount"),
        order=("caller", "callee"),
        title="Dependency links (caller TYPE → callee TYPE)",
        shown=("caller", "callee", "calls", "errors", "remote_errors", "timeouts", "unroutable", "nacked",
               "late_replies", "no_outcome", "receivers"),
        first=("errors", "calls"),
    ),
    Table(
        "latency",
        ("callee", "route", "method", "calls", "answered", "p50_ms", "p90_ms", "p99_ms", "max_ms",
         "mean_ms"),
        order=("callee", "route", "method"),
        title="Calls and round-trip latency per method (ms, caller's clock)",
        shown=("callee", "route", "method", "calls", "answered", "p50_ms", "p90_ms", "p99_ms", "max_ms",
               "mean_ms"),
        first=("p99_ms", "calls"),
    ),
    Table(
        "timeline",
        ("callee", "bucket_ns", "bucket_ms", "calls", "errors", "timeouts", "remote_errors", "p50_ms",
         "p99_ms"),
        order=("callee", "bucket_ns"),
    ),
    Table(
        "route_rates",
        ("callee", "route", "calls", "returns", "republishes", "republished_calls", "republish_ok",
         "republish_failed", "nacks", "timeouts", "remote_errors", "unroutable", "no_outcome", "returns_rate",
         "timeouts_rate", "remote_errors_rate", "unroutable_rate"),
        order=("callee", "route"),
        title="Rates per route",
        shown=("callee", "route", "calls", "returns", "republishes", "republished_calls", "republish_ok",
               "republish_failed", "nacks", "timeouts", "remote_errors", "unroutable", "no_outcome"),
        first=("calls",),
    ),
    Table(
        "duplicate_deliveries",
        ("service", "instance", "request_id", "method", "deliveries", "redelivered", "requeues", "caught",
         "first_t"),
        order=("service", "instance", "request_id"),
        title="Duplicate deliveries (same request, same instance)",
        shown=("service", "instance", "request_id", "method", "deliveries", "redelivered", "requeues",
               "caught"),
        first=("deliveries",),
    ),
    Table(
        "redeliveries",
        ("service", "instance", "deliveries", "redelivered", "redelivered_rate", "nacks", "rejects",
         "requeued"),
        order=("service", "instance"),
        title="Redeliveries per instance",
        shown=("service", "instance", "deliveries", "redelivered", "nacks", "rejects", "requeued"),
        first=("redelivered", "deliveries"),
    ),
    Table(
        "blocked_periods",
        ("service", "instance", "connection_id", "reason", "start_t", "end_t", "ended_by", "duration_ms"),
        order=("instance", "start_t"),
        title="Blocked periods",
        shown=("service", "instance", "reason", "ended_by", "duration_ms"),
        first=("duration_ms",),
    ),
    Table(
        "reconnects",
        ("service", "instance", "reconnect_t", "lost_t", "downtime_ms"),
        order=("instance", "reconnect_t"),
        title="Reconnects",
        shown=("service", "instance", "downtime_ms"),
        first=("downtime_ms",),
    ),
    Table(
        "data_quality",
        ("lines", "corrupt_lines", "invalid_events", "events", "unknown_events", "orphan_events",
         "orphan_caller_events", "orphan_deliveries", "calls", "calls_without_outcome", "instances"),
    ),
)  # fmt: skip
"""Every table, in the order the job writes them."""

COLUMNS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        "caller": ("caller", "the TYPE that made the calls"),
        "callee": ("callee", "the TYPE called (* for a broadcast)"),
        "route": ("route", "the address form: point-to-point, stateless, multicast or broadcast"),
        "method": ("method", "the remote method"),
        "calls": ("calls", "calls made (see What is a call, above)"),
        "answered": ("answered", "calls that got a reply: a result or a remote error"),
        "errors": ("errors", "remote errors, timeouts, unroutable and nacked calls"),
        "remote_errors": ("remote errors", "calls whose handler answered with an error"),
        "timeouts": ("timeouts", "calls with no reply before their deadline"),
        "unroutable": ("unroutable", "calls the broker returned until the caller gave up (no queue bound)"),
        "nacked": ("nacked", "calls the broker refused (nack) for good"),
        "late_replies": ("late replies", "replies that came after their call had given up (timed out)"),
        "no_outcome": ("no outcome", "calls that ended in none of the above: usually their instance stopped"),
        "receivers": ("receivers", "the TYPEs a broadcast reached"),
        "p50_ms": ("p50 ms", "median round-trip time of the answered calls, caller's clock"),
        "p90_ms": ("p90 ms", "90th percentile of the round-trip time"),
        "p99_ms": ("p99 ms", "99th percentile of the round-trip time"),
        "max_ms": ("max ms", "the slowest answered call"),
        "mean_ms": ("mean ms", "the average round-trip time"),
        "returns": ("returns", "publish attempts the broker returned (no queue bound at that moment)"),
        "republishes": ("republishes", "attempts published again after a return, a nack or a lost link"),
        "republished_calls": ("republished calls", "calls published more than once"),
        "republish_ok": ("republished, then ok", "republished calls that got their result"),
        "republish_failed": ("republished, then failed", "republished calls that ended in an error"),
        "nacks": ("nacks", "negative acknowledgements (of publishes by the broker, of deliveries here)"),
        "service": ("service", "the instance's TYPE"),
        "instance": (
            "instance",
            "TYPE.HOST.PID: the instance's address and its process id, which tells a restarted instance "
            "(a new process) from its earlier run",
        ),
        "request_id": ("request id", "the call's id, the same on every delivery of it"),
        "deliveries": ("deliveries", "times the broker delivered it (the request, or any request) here"),
        "redelivered": ("redelivered", "deliveries flagged redelivered by the broker (after a lost link)"),
        "requeues": ("requeues", "repeats that followed a nack or reject with requeue on this instance"),
        "caught": ("caught", "repeats the idempotency window recognised: the handler did not run again"),
        "rejects": ("rejects", "deliveries rejected (not Gear messages, or given up)"),
        "requeued": ("requeued", "deliveries settled with requeue (the broker delivers them again)"),
        "reason": ("reason", "why the broker blocked the connection (memory or disk alarm)"),
        "ended_by": ("ended by", "what ended the period: unblocked, the connection lost, or open at the end"),
        "duration_ms": ("duration ms", "how long the connection stayed blocked"),
        "downtime_ms": ("downtime ms", "from the connection lost to the link made again"),
        "lines": ("lines", "lines read from the trace files"),
        "corrupt_lines": ("corrupt lines", "lines that are not JSON, or hold values of the wrong type"),
        "invalid_events": ("invalid events", "parsed lines without a time, an event name or an instance"),
        "events": ("events", "the valid events analysed"),
        "unknown_events": ("unknown events", "valid events whose name is not a Gear event"),
        "orphan_events": (
            "orphan events",
            "events that could not be tied to a call: the two kinds below (usually the input's edges)",
        ),
        "orphan_caller_events": (
            "orphan caller events",
            "caller-side events (confirm, response, timeout...) without the publish of their request",
        ),
        "orphan_deliveries": ("orphan deliveries", "deliveries of requests nobody in the input published"),
        "calls_without_outcome": ("calls without outcome", "calls with no response, timeout or verdict"),
        "instances": ("instances", "instances that wrote the input"),
    }
)
"""A column's heading in the report and what it counts, for every column the report shows (the table
names stay snake_case in the Parquet output)."""

BY_NAME = MappingProxyType({table.name: table for table in TABLES})
"""Each table by name."""

TABLE_NAMES = tuple(table.name for table in TABLES)
"""The table names, in order."""

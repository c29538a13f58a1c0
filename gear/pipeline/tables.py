"""The tables the job writes: one definition of each table's columns, row order and report view.

The Spark side (:mod:`gear.pipeline.job`) writes each table with exactly :attr:`Table.columns` in that
order, sorted by :attr:`Table.order`; the report (:mod:`gear.pipeline.report`) shows :attr:`Table.shown`
under :attr:`Table.title`. This module imports nothing from Spark, so the report and the package's
entry point can use it without PySpark.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

__all__ = (
    "BY_NAME",
    "CALL_DEFINITION",
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
"""The report's name of each ``gear.route`` value (``gear.address.Route``; the tables keep the value)."""

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

BY_NAME = MappingProxyType({table.name: table for table in TABLES})
"""Each table by name."""

TABLE_NAMES = tuple(table.name for table in TABLES)
"""The table names, in order."""

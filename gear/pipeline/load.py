"""Reading trace files into one flat, cached DataFrame of valid events, counting what was not valid.

A line Spark cannot parse with the schema (not JSON, or a value of the wrong type) is *corrupt*; a
parsed line without a time, an event name or a service instance is *invalid*. Neither stops the job.

Sampled traces: an instance that records only a share r of the traces (head sampling by trace id)
writes ``gear.trace.sample_rate`` = r in its resource. Each of its events with a (hex) ``trace_id``
stands for 1/r events of the whole traffic, so it gets the weight ``w`` = 1/r; an event without a
trace id (connection events, a rejected foreign message) is never sampled away and weighs 1, as does
every event of an instance without a rate. Tables count with :func:`estimate`; the line counts here stay raw.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Row, SparkSession, functions as sf

from gear.pipeline.schema import CORRUPT_COLUMN, read_schema
from gear.tracing.api import Attr, EventName

__all__ = ("WEIGHT", "Loaded", "attr", "count_where", "estimate", "load_events", "resolve_paths")

_ATTRS = {
    "kind": Attr.RPC_KIND,
    "peer": Attr.PEER_SERVICE,
    "route": Attr.ROUTE,
    "method": Attr.RPC_METHOD,
    "attempt": Attr.ATTEMPT,
    "error_type": Attr.ERROR_TYPE,
    "request_id": Attr.REQUEST_ID,
    "conversation_id": Attr.CONVERSATION_ID,
    "op_name": Attr.OPERATION_NAME,
    "redelivered": Attr.REDELIVERED,
    "requeue": Attr.REQUEUE,
    "duplicate": Attr.DUPLICATE,
    "republish_reason": Attr.REPUBLISH_REASON,
    "blocked_reason": Attr.BLOCKED_REASON,
    "connection_id": Attr.CONNECTION_ID,
    "downtime_ms": Attr.DOWNTIME_MS,
    "routing_key": Attr.ROUTING_KEY,
}


_RESOURCE = {"service": "service.name", "instance": "service.instance.id", "rate": "gear.trace.sample_rate"}
"""The resource fields the tables use (the only ones parsed)."""

WEIGHT = "w"
"""The column of each event's weight: how many events of the whole traffic it stands for."""


def attr(key: str) -> Column:
    """The attribute ``key`` (a dotted OpenTelemetry name) of the raw line."""
    return sf.col("attributes").getField(key)


def count_where(condition: Column) -> Column:
    """An aggregate: how many rows satisfy ``condition`` (0 when none do)."""
    return sf.coalesce(sf.sum(sf.when(condition, 1).otherwise(0)), sf.lit(0)).cast("long")


def estimate(condition: Column | None = None, value: str | None = None) -> Column:
    """An aggregate: how many rows of the whole traffic satisfy ``condition`` (every row when None),
    each row counting its weight; with ``value``, the weighted sum of that column. Rounded to a long."""
    term = sf.col(WEIGHT) if value is None else sf.col(WEIGHT) * sf.col(value)
    if condition is not None:
        term = sf.when(condition, term)
    return sf.coalesce(sf.round(sf.sum(term)), sf.lit(0)).cast("long")


def _weight() -> Column:
    """1/rate for an event that could have been sampled away, else 1.

    Sampling reads the last 16 hex digits of the trace id (``gear.tracing.sampling``): an event without
    a trace id, or with one that is not hex, is always written. The rate is tested first, so events of
    instances that do not sample never run the pattern.
    """
    rate = sf.col("rate")
    traced = sf.substring(sf.col("trace_id"), -16, 16).rlike("^[0-9a-fA-F]+$")
    return sf.when((rate > 0) & (rate < 1) & traced, 1.0 / rate).otherwise(sf.lit(1.0))


def _peer_from_key() -> Column:
    """The callee TYPE read off a Gear routing key, for publishers that omit ``service.peer.name``."""
    key = sf.col("routing_key")
    return sf.when(key == "@all.@all", sf.lit("*")).otherwise(sf.split(key, r"[.]").getItem(0))


def _route_from_key() -> Column:
    """The ``gear.route`` form of a Gear routing key (see ``gear.base.address``)."""
    key = sf.col("routing_key")
    return (
        sf.when(key.isNull(), sf.lit(None))
        .when(key == "@all.@all", "all")
        .when(key.endswith(".@all"), "type_all")
        .when(key.contains("."), "type_host")
        .otherwise("type")
    )


@dataclass
class Loaded:
    """The valid events, the cached frame they come from (unpersist it when done) and the line counts."""

    events: DataFrame
    cached: DataFrame
    lines: int
    corrupt: int
    invalid: int
    unknown: int
    """Valid lines whose event name is not an ``EventName``."""
    instances: int
    sample_rates: dict[str, float]
    """The instances that sampled, with their rates (read off the weights of their traced events)."""


def resolve_paths(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[str]:
    """Normalise ``path`` (one or several files/directories/URLs) to strings.

    Raises:
        FileNotFoundError: if a local path does not exist.
    """
    items = [path] if isinstance(path, str | os.PathLike) else list(path)
    out: list[str] = []
    for item in items:
        text = os.fspath(item)
        if "://" not in text and not Path(text).exists():
            raise FileNotFoundError(f"no trace files at {text}")
        out.append(text)
    return out


def _rates(rows: list[Row]) -> dict[str, float]:
    """Instance -> its lowest rate, from ``(instance, w)`` rows (12 digits undo the 1/w rounding)."""
    rates: dict[str, float] = {}
    for row in rows:
        rate = float(f"{1 / row[WEIGHT]:.12g}")
        rates[row["instance"]] = min(rate, rates.get(row["instance"], rate))
    return dict(sorted(rates.items()))


def load_events(spark: SparkSession, paths: list[str]) -> Loaded:
    """Read every ``*.jsonl`` under ``paths`` with the explicit schema and flatten it."""
    reader = (
        spark.read.schema(read_schema(_RESOURCE.values(), _ATTRS.values()))
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT_COLUMN)
        .option("recursiveFileLookup", "true")
    )
    if any("://" in p or Path(p).is_dir() for p in paths):
        reader = reader.option("pathGlobFilter", "*.jsonl")
    raw = reader.json(paths)
    resource = sf.col("resource")
    flat = raw.select(
        sf.col(CORRUPT_COLUMN).alias("corrupt"),
        sf.col("time_unix_nano").alias("t"),
        sf.col("`event.name`").alias("name"),
        sf.col("`gear.event.seq`").alias("seq"),
        "trace_id",
        "span_id",
        *[resource.getField(key).alias(name) for name, key in _RESOURCE.items()],
        *[attr(key).alias(name) for name, key in _ATTRS.items()],
    )
    # Derived once here and cached: every table reads these, and the JSON is parsed a single time. Only
    # the columns the tables use are kept, so the cache stays small. Sorted by event name within each
    # partition, so that each cached batch (10 000 rows) holds one or a few names and its min/max
    # statistics let a scan that filters on the name skip the other batches.
    flat = (
        flat.withColumn("rid", sf.coalesce("span_id", "request_id", "conversation_id"))
        .withColumn("peer", sf.coalesce("peer", _peer_from_key()))
        .withColumn("route", sf.coalesce("route", _route_from_key()))
        .withColumn(WEIGHT, _weight())
        .drop("trace_id", "span_id", "request_id", "conversation_id", "routing_key", "rate")
        .sortWithinPartitions("name")
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    ok = (
        sf.col("corrupt").isNull()
        & sf.col("t").isNotNull()
        & sf.col("name").isNotNull()
        & sf.col("instance").isNotNull()
        & sf.col("service").isNotNull()
    )
    known = [str(name) for name in EventName]
    counts = flat.agg(
        sf.count(sf.lit(1)).alias("lines"),
        count_where(sf.col("corrupt").isNotNull()).alias("corrupt"),
        count_where(sf.col("corrupt").isNull() & ~ok).alias("invalid"),
        count_where(ok & ~sf.col("name").isin(known)).alias("unknown"),
        sf.countDistinct(sf.when(ok, sf.col("instance"))).alias("instances"),
        sf.collect_set(sf.when(ok & (sf.col(WEIGHT) > 1), sf.struct("instance", WEIGHT))).alias("sampled"),
    ).first()
    assert counts is not None
    valid = flat.filter(ok).drop("corrupt")
    return Loaded(
        valid,
        flat,
        lines=int(counts["lines"]),
        corrupt=int(counts["corrupt"]),
        invalid=int(counts["invalid"]),
        unknown=int(counts["unknown"]),
        instances=int(counts["instances"]),
        sample_rates=_rates(counts["sampled"]),
    )

"""Per-instance connection tables: blocked periods and reconnects, with durations.

A blocked period starts at ``gear.connection.blocked`` and ends at the next ``unblocked``,
``connection.lost`` or ``reconnect`` of the same instance (``ended_by`` says which); a period still open
at the end of the data ends at that instance's last event (``ended_by`` = ``open``). A repeated
``blocked`` while already blocked does not start a new period. A reconnect's downtime is its
``gear.reconnect.downtime_ms`` attribute, or else the time since the instance's previous
``connection.lost`` (same clock, so skew-free).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window, functions as sf

from gear.tracing.api import EventName as E

__all__ = ("blocked_periods", "reconnects")

_ENDED_BY = {
    str(E.UNBLOCKED): "unblocked",
    str(E.CONNECTION_LOST): "connection_lost",
    str(E.RECONNECT): "reconnect",
}
_CONNECTION_EVENTS = [str(E.BLOCKED), *_ENDED_BY]


def _in_window(df: DataFrame, column: str, since_ns: int | None, until_ns: int | None) -> DataFrame:
    if since_ns is not None:
        df = df.filter(sf.col(column) >= since_ns)
    if until_ns is not None:
        df = df.filter(sf.col(column) < until_ns)
    return df


def blocked_periods(events: DataFrame, since_ns: int | None = None, until_ns: int | None = None) -> DataFrame:
    """One row per blocked period: service, instance, reason, start, end, ended_by, duration_ms."""
    conn = events.filter(sf.col("name").isin(_CONNECTION_EVENTS))
    order = Window.partitionBy("instance").orderBy("t", "seq")
    later = order.rowsBetween(1, Window.unboundedFollowing)
    ender = sf.when(
        sf.col("name").isin(list(_ENDED_BY)), sf.struct(sf.col("t").alias("t"), sf.col("name").alias("n"))
    )
    marked = (
        conn.withColumn("previous", sf.lag("name").over(order))
        .withColumn("end", sf.first(ender, ignorenulls=True).over(later))
        .filter(
            (sf.col("name") == str(E.BLOCKED))
            & ~sf.coalesce(sf.col("previous") == str(E.BLOCKED), sf.lit(False))
        )
    )
    last_seen = events.groupBy("instance").agg(sf.max("t").alias("last_t"))
    ended_by = sf.lit("open")
    for name, label in _ENDED_BY.items():
        ended_by = sf.when(sf.col("end.n") == name, label).otherwise(ended_by)
    periods = (
        marked.join(last_seen, "instance", "left")
        .select(
            "service",
            "instance",
            sf.col("connection_id"),
            sf.col("blocked_reason").alias("reason"),
            sf.col("t").alias("start_t"),
            sf.coalesce(sf.col("end.t"), sf.col("last_t")).alias("end_t"),
            ended_by.alias("ended_by"),
        )
        .withColumn("duration_ms", (sf.col("end_t") - sf.col("start_t")).cast("double") / 1e6)
    )
    return _in_window(periods, "start_t", since_ns, until_ns)


def reconnects(events: DataFrame, since_ns: int | None = None, until_ns: int | None = None) -> DataFrame:
    """One row per reconnect: service, instance, time, downtime_ms."""
    conn = events.filter(sf.col("name").isin(str(E.CONNECTION_LOST), str(E.RECONNECT)))
    before = Window.partitionBy("instance").orderBy("t", "seq").rowsBetween(Window.unboundedPreceding, -1)
    lost_t = sf.last(sf.when(sf.col("name") == str(E.CONNECTION_LOST), sf.col("t")), ignorenulls=True).over(
        before
    )
    rows = (
        conn.withColumn("lost_t", lost_t)
        .filter(sf.col("name") == str(E.RECONNECT))
        .select(
            "service",
            "instance",
            sf.col("t").alias("reconnect_t"),
            "lost_t",
            sf.coalesce(sf.col("downtime_ms"), (sf.col("t") - sf.col("lost_t")).cast("double") / 1e6).alias(
                "downtime_ms"
            ),
        )
    )
    return _in_window(rows, "reconnect_t", since_ns, until_ns)

"""Calls as the caller saw them, and the tables built from them: links, latency, rates per route.

A call is the set of caller-side events of one request id on one instance (``gear.publish`` with
``gear.rpc.kind`` call/cast/gather, its confirms, returns, republishes, and the response, timeout, late
reply or unroutable). Its outcome, in order of precedence:

``unroutable`` > ``ok`` (a response without ``error.type``) > ``remote_error`` > ``timeout`` >
``nacked`` (a nack and no confirm) > ``ok`` for a confirmed cast > ``none`` (no outcome seen).

Latency is first response minus first publish, both on the caller's clock, so clock skew between
machines cannot distort it. Percentiles use ``percentile_approx`` with accuracy 10 000, which returns
an element of the data (the nearest rank) and is exact on small groups.

A call weighs what its caller's events weigh (1/rate when the caller samples traces, see
:mod:`gear.pipeline.load`): the tables' counts, latency's ``n`` included, are estimates of the whole
traffic. Per-call facts (returns, republishes, nacks of one call) stay as seen and are weighted when
summed. Percentiles, max and mean come from the recorded calls unweighted: sampling by trace id is
uniform, so they estimate the whole traffic's as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf

from gear.pipeline.load import WEIGHT, count_where, estimate
from gear.tracing.api import EventName as E

__all__ = (
    "CALLER_EVENTS",
    "CallTotals",
    "build_calls",
    "call_totals",
    "dependency_links",
    "latency",
    "route_rates",
)

CALLER_EVENTS = (
    E.PUBLISH,
    E.CONFIRM,
    E.NACK,
    E.RETURN,
    E.REPUBLISH,
    E.REPLY_RECEIVED,
    E.TIMEOUT,
    E.LATE_REPLY,
    E.UNROUTABLE,
)
"""Events that belong to the caller side of a call."""

ERROR_OUTCOMES = ("remote_error", "timeout", "unroutable", "nacked")


def _is(name: E) -> Column:
    return sf.col("name") == str(name)


def _not_reply() -> Column:
    return sf.col("kind").isNull() | (sf.col("kind") != "reply")


def build_calls(
    events: DataFrame, since_ns: int | None, until_ns: int | None
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """Return ``(calls, caller_orphans, cached)``: one row per call, caller events with no publish, and
    the cached frames both derive from (unpersist it when done).

    The per-request aggregate keeps only numbers (so Spark aggregates it in a hash map, without sorting);
    the first publish's descriptive columns are joined back on its time.
    """
    mine = events.filter(sf.col("name").isin([str(n) for n in CALLER_EVENTS]) & _not_reply())
    grouped = (
        mine.groupBy("instance", "rid")
        .agg(
            sf.min(sf.when(_is(E.PUBLISH), sf.col("t"))).alias("t"),
            sf.count(sf.lit(1)).alias("n_events"),
            sf.max(WEIGHT).alias(WEIGHT),
            count_where(_is(E.RETURN)).alias("returns"),
            count_where(_is(E.REPUBLISH)).alias("republishes"),
            count_where(_is(E.NACK)).alias("nacks"),
            count_where(_is(E.CONFIRM)).alias("confirms"),
            sf.min(sf.when(_is(E.REPLY_RECEIVED), sf.col("t"))).alias("t_response"),
            count_where(_is(E.REPLY_RECEIVED) & sf.col("error_type").isNull()).alias("ok_replies"),
            count_where(_is(E.REPLY_RECEIVED) & sf.col("error_type").isNotNull()).alias("error_replies"),
            count_where(_is(E.TIMEOUT)).alias("timeout_events"),
            count_where(_is(E.LATE_REPLY)).alias("late_replies"),
            count_where(_is(E.UNROUTABLE)).alias("unroutable_events"),
        )
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    orphans = grouped.filter(sf.col("t").isNull())
    publishes = mine.filter(_is(E.PUBLISH)).select(
        "instance", "rid", "t", "service", "peer", "route", "method", "kind"
    )
    c = sf.col
    outcome = (
        sf.when(c("unroutable_events") > 0, "unroutable")
        .when(c("ok_replies") > 0, "ok")
        .when(c("error_replies") > 0, "remote_error")
        .when(c("timeout_events") > 0, "timeout")
        .when((c("nacks") > 0) & (c("confirms") == 0), "nacked")
        .when((c("kind") == "cast") & (c("confirms") > 0), "ok")
        .otherwise("none")
    )
    calls = (
        grouped.filter(c("t").isNotNull())
        .join(publishes, ["instance", "rid", "t"])
        .withColumnRenamed("service", "caller")
        .withColumn("callee", sf.coalesce(c("peer"), sf.lit("unknown")))
        .withColumn("route", sf.coalesce(c("route"), sf.lit("unknown")))
        .withColumn("method", sf.coalesce(c("method"), sf.lit("unknown")))
        .withColumn("outcome", outcome)
        .withColumn(
            "latency_ms",
            sf.when(c("t_response").isNotNull(), (c("t_response") - c("t")).cast("double") / 1e6),
        )
    )
    if since_ns is not None:
        calls = calls.filter(c("t") >= since_ns)
    if until_ns is not None:
        calls = calls.filter(c("t") < until_ns)
    return calls.persist(StorageLevel.MEMORY_AND_DISK), orphans, grouped


@dataclass(frozen=True, slots=True)
class CallTotals:
    """What the summary needs of the calls as a whole, read in one pass."""

    first_t: int | None
    """The first publish time (ns); None without calls."""
    last_t: int | None
    calls: int
    """Calls recorded (raw: a data-quality figure)."""
    no_outcome: int
    """Recorded calls whose outcome is ``none``."""
    estimated_calls: int
    """Calls of the whole traffic: :attr:`calls` weighted (equal to it when nothing was sampled)."""


def call_totals(calls: DataFrame) -> CallTotals:
    """The time span, the number of calls (recorded and estimated) and of calls without an outcome."""
    row = calls.agg(
        sf.min("t").alias("lo"),
        sf.max("t").alias("hi"),
        sf.count(sf.lit(1)).alias("calls"),
        count_where(sf.col("outcome") == "none").alias("none"),
        estimate().alias("estimated"),
    ).first()
    assert row is not None
    lo, hi = row["lo"], row["hi"]
    return CallTotals(
        None if lo is None else int(lo),
        None if hi is None else int(hi),
        int(row["calls"]),
        int(row["none"]),
        int(row["estimated"]),
    )


def _delivered_types(events: DataFrame) -> DataFrame:
    return (
        # Only broadcasts need this; their deliveries say so by route (or by the @all.@all routing key).
        events.filter(_is(E.DELIVER) & _not_reply() & (sf.col("route").isNull() | (sf.col("route") == "all")))
        .select("rid", sf.col("service").alias("delivered_to"))
        .distinct()
    )


def dependency_links(calls: DataFrame, events: DataFrame) -> DataFrame:
    """caller TYPE -> callee TYPE with calls, errors and their kinds (broadcasts: per receiving TYPE)."""
    wide = (
        calls.filter(sf.col("callee") == "*")
        .join(_delivered_types(events), "rid", "left")
        .withColumn("callee", sf.coalesce("delivered_to", sf.lit("*")))
        .drop("delivered_to")
    )
    linked = calls.filter(sf.col("callee") != "*").unionByName(wide)
    out = sf.col("outcome")
    return (
        linked.groupBy("caller", "callee")
        .agg(
            estimate().alias("calls"),
            estimate(out.isin(*ERROR_OUTCOMES)).alias("errors"),
            estimate(out == "remote_error").alias("remote_errors"),
            estimate(out == "timeout").alias("timeouts"),
            estimate(out == "unroutable").alias("unroutable"),
            estimate(out == "nacked").alias("nacked"),
            estimate(value="late_replies").alias("late_replies"),
            estimate(out == "none").alias("no_outcome"),
        )
        .withColumn("parent", sf.col("caller"))
        .withColumn("child", sf.col("callee"))
        .withColumn("callCount", sf.col("calls"))
        .withColumn("errorCount", sf.col("errors"))
    )


def latency(calls: DataFrame) -> DataFrame:
    """p50/p90/p99/max/mean of caller round trips per callee, route form and method."""
    q = sf.percentile_approx("latency_ms", [0.5, 0.9, 0.99], 10000)
    return (
        calls.filter(sf.col("latency_ms").isNotNull())
        .groupBy("callee", "route", "method")
        .agg(
            estimate().alias("n"),
            q.alias("q"),
            sf.max("latency_ms").alias("max_ms"),
            sf.avg("latency_ms").alias("mean_ms"),
        )
        .select(
            "callee",
            "route",
            "method",
            "n",
            sf.col("q")[0].alias("p50_ms"),
            sf.col("q")[1].alias("p90_ms"),
            sf.col("q")[2].alias("p99_ms"),
            "max_ms",
            "mean_ms",
        )
    )


def route_rates(calls: DataFrame) -> DataFrame:
    """Per callee and route form: returns, republishes and how they ended, nacks, timeouts, errors."""
    out = sf.col("outcome")
    republished = sf.col("republishes") > 0
    rates = calls.groupBy("callee", "route").agg(
        estimate().alias("calls"),
        estimate(value="returns").alias("returns"),
        estimate(value="republishes").alias("republishes"),
        estimate(republished).alias("republished_calls"),
        estimate(republished & (out == "ok")).alias("republish_ok"),
        estimate(republished & (out != "ok")).alias("republish_failed"),
        estimate(value="nacks").alias("nacks"),
        estimate(out == "timeout").alias("timeouts"),
        estimate(out == "remote_error").alias("remote_errors"),
        estimate(out == "unroutable").alias("unroutable"),
        estimate(out == "none").alias("no_outcome"),
    )
    for name in ("returns", "timeouts", "remote_errors", "unroutable"):
        rates = rates.withColumn(f"{name}_rate", sf.col(name) / sf.col("calls"))
    return rates

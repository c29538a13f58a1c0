"""Calls as the caller saw them, and the tables built from them: links, latency, rates per route.

A call is the set of caller-side events of one request id on one instance (``gear.publish`` with
``gear.rpc.kind`` call/cast/gather, its confirms, returns, republishes, and the response, timeout, late
reply or unroutable). Its outcome, in order of precedence:

``unroutable`` > ``ok`` (a response without ``error.type``) > ``remote_error`` > ``timeout`` >
``nacked`` (a nack and no confirm) > ``ok`` for a confirmed cast > ``none`` (no outcome seen).

Every table counts calls this way (the report states it: ``gear.pipeline.tables.CALL_DEFINITION``): once
per request, whatever the number of attempts and of instances that received it, so each table's calls
add up to the same total. A
broadcast (``*.*``) is one call to the callee ``*``; ``dependency_links`` names the TYPEs it reached in
``receivers`` instead of counting it once per TYPE.

Latency is first response minus first publish, both on the caller's clock, so clock skew between
machines cannot distort it; only calls that got a reply (``answered``) have one. Percentiles use
``percentile_approx`` with accuracy 10 000, which returns an element of the data (the nearest rank) and
is exact on small groups.

A call weighs what its caller's events weigh (1/rate when the caller samples traces, see
:mod:`gear.pipeline.load`): the tables' counts, latency's ``calls`` and ``answered`` included, are
estimates of the whole traffic. Per-call facts (returns, republishes, nacks of one call) stay as seen
and are weighted when summed. Percentiles, max and mean come from the recorded calls unweighted:
sampling by trace id is uniform, so they estimate the whole traffic's as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, functions as sf

from gear.pipeline.load import WEIGHT, count_where, estimate
from gear.tracing.api import EventName as E

__all__ = (
    "CALLER_EVENTS",
    "ERROR_OUTCOMES",
    "OUTCOMES",
    "CallTotals",
    "build_calls",
    "call_counts",
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

OUTCOMES = ("ok", "remote_error", "timeout", "unroutable", "nacked", "none")
"""Every outcome a call can have, in the order the report lists them."""

ERROR_OUTCOMES = ("remote_error", "timeout", "unroutable", "nacked")
"""The outcomes that count as errors (Zipkin's ``errorCount``)."""


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
    outcomes: dict[str, int] = field(default_factory=dict)
    """Weighted calls per outcome (every one of :data:`OUTCOMES`)."""
    answered: int = 0
    """Weighted calls that got a reply (ok or remote error): the calls latency is measured on."""

    def breakdown(self) -> dict[str, int]:
        """The summary's ``calls`` entry: total, answered, errors, each outcome, and confirmed casts
        (calls that are ok without a reply: a cast expects none)."""
        errors = sum(self.outcomes.get(o, 0) for o in ERROR_OUTCOMES)
        with_reply_ok = self.answered - self.outcomes.get("remote_error", 0)
        return {
            "total": self.estimated_calls,
            "answered": self.answered,
            "errors": errors,
            **{o: self.outcomes.get(o, 0) for o in OUTCOMES},
            "confirmed_casts": max(0, self.outcomes.get("ok", 0) - with_reply_ok),
        }


def call_totals(calls: DataFrame) -> CallTotals:
    """The time span, the number of calls (recorded and estimated), per outcome and answered."""
    out = sf.col("outcome")
    row = calls.agg(
        sf.min("t").alias("lo"),
        sf.max("t").alias("hi"),
        sf.count(sf.lit(1)).alias("calls"),
        count_where(out == "none").alias("none"),
        estimate().alias("estimated"),
        estimate(sf.col("latency_ms").isNotNull()).alias("answered"),
        *[estimate(out == name).alias(f"outcome_{name}") for name in OUTCOMES],
    ).first()
    assert row is not None
    lo, hi = row["lo"], row["hi"]
    return CallTotals(
        None if lo is None else int(lo),
        None if hi is None else int(hi),
        int(row["calls"]),
        int(row["none"]),
        int(row["estimated"]),
        {name: int(row[f"outcome_{name}"]) for name in OUTCOMES},
        int(row["answered"]),
    )


def _receivers(calls: DataFrame, events: DataFrame) -> DataFrame:
    """Per broadcast call (``rid``): the TYPEs its request was delivered to, sorted and comma-joined."""
    broadcasts = calls.filter(sf.col("callee") == "*").select("rid")
    delivered = (
        # Broadcast deliveries say so by route (or by the @all.@all routing key).
        events.filter(_is(E.DELIVER) & _not_reply() & (sf.col("route").isNull() | (sf.col("route") == "all")))
        .select("rid", "service")
        .join(broadcasts, "rid", "left_semi")
    )
    return delivered.groupBy("rid").agg(sf.array_sort(sf.collect_set("service")).alias("types"))


def call_counts(outcome: Column) -> list[Column]:
    """Aggregates of a group of calls, estimated where the traces were sampled: ``calls``, the failed
    ones (``errors``), and the two failures told apart most, ``remote_errors`` and ``timeouts``."""
    return [
        estimate().alias("calls"),
        estimate(outcome.isin(*ERROR_OUTCOMES)).alias("errors"),
        estimate(outcome == "remote_error").alias("remote_errors"),
        estimate(outcome == "timeout").alias("timeouts"),
    ]


def dependency_links(calls: DataFrame, events: DataFrame) -> DataFrame:
    """caller TYPE -> callee TYPE with calls, errors and their kinds. A broadcast is one call to ``*``
    (counted once, like every call); ``receivers`` lists the TYPEs such calls reached."""
    out = sf.col("outcome")
    reached = sf.array_sort(sf.array_distinct(sf.flatten(sf.collect_list(sf.coalesce("types", sf.array())))))
    return (
        calls.join(_receivers(calls, events), "rid", "left")
        .groupBy("caller", "callee")
        .agg(
            *call_counts(out),
            estimate(out == "unroutable").alias("unroutable"),
            estimate(out == "nacked").alias("nacked"),
            estimate(value="late_replies").alias("late_replies"),
            estimate(out == "none").alias("no_outcome"),
            reached.alias("reached"),
        )
        .withColumn(
            "receivers",
            sf.when(sf.col("callee") == "*", sf.array_join("reached", ", ")).otherwise(sf.col("callee")),
        )
        .drop("reached")
        .withColumn("parent", sf.col("caller"))
        .withColumn("child", sf.col("callee"))
        .withColumn("callCount", sf.col("calls"))
        .withColumn("errorCount", sf.col("errors"))
    )


def latency(calls: DataFrame) -> DataFrame:
    """Per callee, route form and method: every call, the answered ones, and p50/p90/p99/max/mean of
    their round trips (null where none was answered: casts, or every call failed without a reply)."""
    q = sf.percentile_approx("latency_ms", [0.5, 0.9, 0.99], 10000)
    return (
        calls.groupBy("callee", "route", "method")
        .agg(
            estimate().alias("calls"),
            estimate(sf.col("latency_ms").isNotNull()).alias("answered"),
            q.alias("q"),
            sf.max("latency_ms").alias("max_ms"),
            sf.avg("latency_ms").alias("mean_ms"),
        )
        .select(
            "callee",
            "route",
            "method",
            "calls",
            "answered",
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

"""Callee-side tables: duplicate deliveries and redeliveries.

A duplicate is a request id delivered more than once to the *same instance*. Multicast (``TYPE.*``) and
broadcast (``*.*``) reach each instance's own queue once, so grouping by instance counts them right:
one delivery per instance is normal, two is a duplicate. Replies (``gear.rpc.kind`` = reply) are not
requests and are left out. ``requeues`` tells how many of the repeats followed a nack/reject with
requeue on that instance; ``caught`` how many the idempotency window flagged (``gear.duplicate``).
The written columns and their order are defined once, in :mod:`gear.pipeline.tables`.

``redeliveries`` counts weighted (estimates of the whole traffic, see :mod:`gear.pipeline.load`);
``duplicate_deliveries`` lists recorded requests as seen, with their weight in the unwritten column
``w`` for an estimate of how many there were.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, functions as sf

from gear.pipeline.load import WEIGHT, count_where, estimate
from gear.tracing.api import EventName as E

__all__ = ("duplicate_deliveries", "orphan_deliveries", "redeliveries", "request_deliveries")


def _true(column: str) -> Column:
    return sf.coalesce(sf.col(column), sf.lit(False))


def request_deliveries(events: DataFrame) -> DataFrame:
    """``gear.deliver`` events of requests (not replies)."""
    kind = sf.col("kind")
    return events.filter((sf.col("name") == str(E.DELIVER)) & (kind.isNull() | (kind != "reply")))


def _requeues(events: DataFrame) -> DataFrame:
    return (
        events.filter((sf.col("name") == str(E.SETTLE)) & _true("requeue"))
        .groupBy("instance", "rid")
        .agg(sf.count(sf.lit(1)).alias("requeues"))
    )


def duplicate_deliveries(events: DataFrame) -> DataFrame:
    """One row per (instance, request id) delivered more than once.

    Every delivery of a request carries its method, so the method is a grouping key: the aggregate then
    holds only numbers and Spark runs it in a hash map instead of sorting every delivery.
    """
    return (
        request_deliveries(events)
        .groupBy("service", "instance", "rid", "method")
        .agg(
            sf.count(sf.lit(1)).alias("deliveries"),
            count_where(_true("redelivered")).alias("redelivered"),
            count_where(_true("duplicate")).alias("caught"),
            sf.min("t").alias("first_t"),
            sf.max(WEIGHT).alias(WEIGHT),
        )
        .filter(sf.col("deliveries") > 1)
        .join(_requeues(events), ["instance", "rid"], "left")
        .withColumn("requeues", sf.coalesce("requeues", sf.lit(0)).cast("long"))
        .withColumnRenamed("rid", "request_id")
    )


def redeliveries(events: DataFrame) -> DataFrame:
    """Per instance: request deliveries, redelivered ones, and settlements (nacks, rejects, requeues)."""
    delivered = (
        request_deliveries(events)
        .groupBy("service", "instance")
        .agg(
            estimate().alias("deliveries"),
            estimate(_true("redelivered")).alias("redelivered"),
        )
    )
    op = sf.col("op_name")
    settled = (
        events.filter(sf.col("name") == str(E.SETTLE))
        .groupBy("instance")
        .agg(
            estimate(op == "nack").alias("nacks"),
            estimate(op == "reject").alias("rejects"),
            estimate(_true("requeue")).alias("requeued"),
        )
    )
    return (
        delivered.join(settled, "instance", "left")
        .fillna(0, subset=["nacks", "rejects", "requeued"])
        .withColumn("redelivered_rate", sf.col("redelivered") / sf.col("deliveries"))
    )


def orphan_deliveries(events: DataFrame) -> DataFrame:
    """Request deliveries whose request id no caller in the input published."""
    published = (
        events.filter(
            (sf.col("name") == str(E.PUBLISH)) & (sf.col("kind").isNull() | (sf.col("kind") != "reply"))
        )
        .select("rid")
        .distinct()
    )
    return request_deliveries(events).join(published, "rid", "left_anti")

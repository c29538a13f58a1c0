"""The time axis: calls, errors, timeouts and latency per callee TYPE in fixed time buckets.

A call belongs to the bucket of its first publish (the caller's clock, like its latency). The bucket
width is chosen from the calls' time span so that the report shows about :data:`TARGET_BUCKETS`
points, rounded to a width people read easily (100 ms, 1 s, 5 s, 1 min, ...). Counts are weighted
estimates and percentiles come from the recorded calls, as in :mod:`gear.pipeline.calls`.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, functions as sf

from gear.pipeline.calls import call_counts

__all__ = ("BUCKETS_MS", "TARGET_BUCKETS", "choose_bucket_ms", "timeline")

TARGET_BUCKETS = 60
"""About how many buckets the time axis gets."""

BUCKETS_MS = (
    10, 20, 50, 100, 200, 500,
    1_000, 2_000, 5_000, 10_000, 15_000, 30_000,
    60_000, 120_000, 300_000, 600_000, 900_000, 1_800_000,
    3_600_000, 7_200_000, 10_800_000, 21_600_000, 43_200_000, 86_400_000,
)  # fmt: skip
"""The bucket widths to choose from, in milliseconds."""


def choose_bucket_ms(span_ns: int) -> int:
    """The smallest width in :data:`BUCKETS_MS` that covers ``span_ns`` in about 60 buckets."""
    wanted = span_ns / 1e6 / TARGET_BUCKETS
    for width in BUCKETS_MS:
        if width >= wanted:
            return width
    return BUCKETS_MS[-1]


def timeline(calls: DataFrame, bucket_ms: int) -> DataFrame:
    """One row per callee and bucket: calls, errors, timeouts, remote errors, p50 and p99 latency."""
    width = bucket_ms * 1_000_000
    q = sf.percentile_approx("latency_ms", [0.5, 0.99], 10000)
    return (
        calls.withColumn("bucket_ns", sf.floor(sf.col("t") / width).cast("long") * width)
        .groupBy("callee", "bucket_ns")
        .agg(
            *call_counts(sf.col("outcome")),
            q.alias("q"),
        )
        .select(
            "callee",
            "bucket_ns",
            sf.lit(bucket_ms).cast("long").alias("bucket_ms"),
            "calls",
            "errors",
            "timeouts",
            "remote_errors",
            sf.col("q")[0].alias("p50_ms"),
            sf.col("q")[1].alias("p99_ms"),
        )
    )

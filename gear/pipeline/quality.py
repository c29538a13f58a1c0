"""The data-quality row: what was read, what was unusable, and what could not be tied together.

* ``corrupt_lines``: lines Spark could not parse with the schema (not JSON, wrong value types);
* ``invalid_events``: parsed lines without a time, an event name or a service instance;
* ``unknown_events``: valid lines whose ``event.name`` is not a Gear event;
* ``orphan_events``: caller-side events (confirm, response, timeout, ...) with no publish of that
  request id on that instance, plus request deliveries whose request id nobody in the input published
  (typically the edges of the input: files from before the window, or an instance not collected);
* ``calls_without_outcome``: calls with neither a response, a timeout, an unroutable nor a fatal nack
  (casts: no confirm) -- usually an instance stopped before its calls ended.

These count what the files hold: they are not scaled up when instances sample their traces. Instances
sampling at different rates show up in the orphans: a callee at a higher rate than its caller records
deliveries of requests the caller did not record.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, functions as sf, types as st

from gear.pipeline.calls import CallTotals
from gear.pipeline.load import Loaded
from gear.pipeline.tables import BY_NAME

__all__ = ("QUALITY_SCHEMA", "data_quality")

QUALITY_SCHEMA = st.StructType(
    [st.StructField(name, st.LongType(), nullable=False) for name in BY_NAME["data_quality"].columns]
)


def data_quality(
    spark: SparkSession,
    loaded: Loaded,
    totals: CallTotals,
    caller_orphans: DataFrame,
    delivery_orphans: DataFrame,
) -> DataFrame:
    """A one-row DataFrame of data-quality counters (see the module docstring)."""
    orphan_caller = caller_orphans.agg(sf.coalesce(sf.sum("n_events"), sf.lit(0)).alias("n")).first()
    orphan_delivery = delivery_orphans.count()
    assert orphan_caller is not None
    row = (
        loaded.lines,
        loaded.corrupt,
        loaded.invalid,
        loaded.lines - loaded.corrupt - loaded.invalid,
        loaded.unknown,
        int(orphan_caller["n"]) + orphan_delivery,
        int(orphan_caller["n"]),
        orphan_delivery,
        totals.calls,
        totals.no_outcome,
        loaded.instances,
    )
    # Literals in a one-row range rather than createDataFrame(list): no Python worker on executors.
    return spark.range(1).select(
        *[
            sf.lit(value).cast("long").alias(field.name)
            for value, field in zip(row, QUALITY_SCHEMA.fields, strict=True)
        ]
    )

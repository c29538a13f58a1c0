"""Re-runs, empty input, windows, and the schema derived from the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gear.pipeline.generate import generate

pytestmark = pytest.mark.timeout(300)


def _links(spark: Any, out: Path) -> dict[tuple[str, str], int]:
    rows = spark.read.parquet(str(out / "dependency_links")).collect()
    return {(r["caller"], r["callee"]): r["calls"] for r in rows}


def test_schema_is_derived_from_the_model() -> None:
    from pyspark.sql import types as st

    from gear.pipeline.schema import event_schema
    from gear.tracing.event import Attributes, Resource, TraceEvent

    schema = event_schema()
    assert [f.name for f in schema.fields] == [f.alias or n for n, f in TraceEvent.model_fields.items()]
    attributes = schema["attributes"].dataType
    assert isinstance(attributes, st.StructType)
    assert attributes.fieldNames() == [f.alias for f in Attributes.model_fields.values()]
    assert attributes["gear.attempt"].dataType == st.LongType()
    assert attributes["gear.amqp.redelivered"].dataType == st.BooleanType()
    assert attributes["gear.duration_ms"].dataType == st.DoubleType()
    resource = schema["resource"].dataType
    assert isinstance(resource, st.StructType)
    assert resource.fieldNames() == [f.alias for f in Resource.model_fields.values()]


def test_rerun_overwrites_and_window_filters(spark: Any, tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from gear.pipeline.job import analyze

    truth = generate(tmp_path / "traces", roots=30, seed=3, corrupt=1)
    expected = {k: v["calls"] for k, v in truth.links().items()}
    first = analyze(spark, tmp_path / "traces", tmp_path / "out")
    analyze(spark, [tmp_path / "traces"], tmp_path / "out")
    assert _links(spark, tmp_path / "out") == expected
    assert first["data_quality"]["corrupt_lines"] == 1
    future = datetime.fromtimestamp(2_000_000_000, UTC)
    windowed = analyze(spark, tmp_path / "traces", tmp_path / "out", since=future)
    assert windowed["tables"]["dependency_links"]["rows"] == 0
    assert _links(spark, tmp_path / "out") == {}


def test_empty_input(spark: Any, tmp_path: Path) -> None:
    from gear.pipeline.job import analyze

    (tmp_path / "traces").mkdir()
    summary = analyze(spark, tmp_path / "traces", tmp_path / "out")
    assert summary["data_quality"]["lines"] == 0
    assert summary["data_quality"]["calls"] == 0
    assert (tmp_path / "out" / "report.html").exists()


def test_missing_input_is_a_clear_error(spark: Any, tmp_path: Path) -> None:
    from gear.pipeline.job import analyze

    with pytest.raises(FileNotFoundError, match="no trace files"):
        analyze(spark, tmp_path / "nope", tmp_path / "out")

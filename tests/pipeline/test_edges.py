"""Empty and missing input, and the Spark schema derived from the pydantic model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(300)


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

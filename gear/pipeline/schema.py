"""The Spark schema of a trace line, derived from the pydantic :class:`~gear.tracing.event.TraceEvent`.

Reading JSON with an explicit schema skips Spark's inference pass and makes bad lines visible: a line
that is not JSON, or whose values have the wrong type, lands in :data:`CORRUPT_COLUMN`.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, get_args

from pydantic import BaseModel
from pyspark.sql import types as st

from gear.tracing.event import TraceEvent

__all__ = ("CORRUPT_COLUMN", "event_schema", "read_schema")

CORRUPT_COLUMN = "_corrupt_record"
"""Spark fills this column with the raw text of a line it could not parse."""

_SCALARS: dict[type, st.DataType] = {
    bool: st.BooleanType(),
    int: st.LongType(),
    float: st.DoubleType(),
    str: st.StringType(),
}


def _spark_type(annotation: Any) -> tuple[st.DataType, bool]:
    args = [a for a in get_args(annotation) if a is not type(None)]
    nullable = bool(get_args(annotation)) and len(args) < len(get_args(annotation))
    python = args[0] if args else annotation
    if isinstance(python, type) and issubclass(python, BaseModel):
        return _struct(python), nullable
    if python in _SCALARS:
        return _SCALARS[python], nullable
    raise TypeError(f"no Spark type for {annotation!r}")


def _struct(model: type[BaseModel]) -> st.StructType:
    fields = []
    for name, info in model.model_fields.items():
        data_type, _ = _spark_type(info.annotation)
        # Everything is nullable when read: a missing key must not fail the line.
        fields.append(st.StructField(info.alias or name, data_type, nullable=True))
    return st.StructType(fields)


def event_schema() -> st.StructType:
    """The ``StructType`` of one trace line, field names as written (``event.name``, ``service.name``...)."""
    return _struct(TraceEvent)


def _keep(struct: st.StructType, names: Collection[str]) -> st.StructType:
    return st.StructType([field for field in struct.fields if field.name in names])


def read_schema(
    resource: Collection[str] | None = None, attributes: Collection[str] | None = None
) -> st.StructType:
    """:func:`event_schema` plus the corrupt-record column, for ``spark.read.json``.

    ``resource`` and ``attributes`` (field names as written) keep only those nested fields: Spark's
    JSON parser then skips the others instead of converting them, and a wrong type in a field nobody
    reads does not make the line corrupt. ``None`` keeps every field.
    """
    fields = []
    for field in event_schema().fields:
        keep = {"resource": resource, "attributes": attributes}.get(field.name)
        if keep is not None and isinstance(field.dataType, st.StructType):
            field = st.StructField(field.name, _keep(field.dataType, keep), nullable=True)
        fields.append(field)
    return st.StructType(fields).add(st.StructField(CORRUPT_COLUMN, st.StringType(), nullable=True))

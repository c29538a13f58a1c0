"""``gear traces analyze``: a PySpark job over Gear trace files.

Importing this package never imports PySpark; :func:`run_analyze` does, and raises
:class:`SparkMissingError` with the install hint when it is absent.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypedDict, Unpack

from gear.pipeline.tables import TABLE_NAMES

__all__ = (
    "INSTALL_HINT",
    "JAVA_HINT",
    "STAGES",
    "TABLE_NAMES",
    "AnalyzeOptions",
    "SparkMissingError",
    "run_analyze",
)

STAGES = (
    "starting Spark",
    "reading trace events",
    "building calls",
    *(f"writing {name}" for name in TABLE_NAMES),
    "writing the report",
    "done",
)
"""The stages the job reports through its ``progress`` callback, in order."""

INSTALL_HINT = "PySpark is not installed: pip install 'gear-rpc[spark]'"


class SparkMissingError(RuntimeError):
    """PySpark (or Java) is missing; the message says how to install it."""

    def __init__(self, message: str = INSTALL_HINT) -> None:
        super().__init__(message)


JAVA_HINT = "Java is not installed: Spark needs a Java 17+ runtime (e.g. apt install openjdk-17-jre-headless)"


def _require_pyspark() -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise SparkMissingError() from exc
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise SparkMissingError(JAVA_HINT)


class AnalyzeOptions(TypedDict, total=False):
    """How :func:`run_analyze` runs, beside its input and output (keyword arguments; see there)."""

    master: str | None
    since: datetime | None
    until: datetime | None
    progress: Callable[[str], None] | None
    conf: dict[str, str] | None


def run_analyze(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    **options: Unpack[AnalyzeOptions],
) -> dict[str, Any]:
    """Analyse trace files under ``path`` and write tables, ``summary.json`` and ``report.html`` to ``out``.

    ``master`` is a Spark master URL (``local[2]``, ``spark://host:7077``); ``None`` keeps whatever
    spark-submit or ``SPARK_MASTER`` chose, and ``local[*]`` otherwise. ``conf`` adds Spark properties
    (e.g. ``spark.sql.shuffle.partitions``). ``since``/``until`` select calls by the caller's first
    publish time (naive datetimes are UTC). ``progress`` is called with each of :data:`STAGES`.

    Raises:
        SparkMissingError: if PySpark is not installed.
        FileNotFoundError: if ``path`` does not exist.
    """
    _require_pyspark()
    from gear.pipeline.job import run

    return run(path, out, **options)

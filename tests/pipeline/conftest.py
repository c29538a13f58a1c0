"""A session-scoped local Spark session for the pipeline tests (skipped without Java or PySpark), and one
analysis of generated traces that the truth, report and browser tests share."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gear.testing.traces.truth import Truth
from tests.conftest import SPARK_SKIP

_WITHOUT_SPARK = ("test_report.py",)
"""The report's own tests: a hand-made summary, no Spark (they run without PySpark installed)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.fspath))
        if "tests/pipeline" in path.as_posix() and path.name not in _WITHOUT_SPARK:
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """``local[1]``, one shuffle partition, no UI: the cheapest JVM that runs the real job."""
    if shutil.which("java") is None:
        pytest.skip("Java is not installed; the Spark tests need a JRE 17+")
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        pytest.skip(SPARK_SKIP)
    session = (
        SparkSession.builder.master("local[1]")
        .appName("gear-pipeline-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.sql.adaptive.enabled", "false")  # tiny inputs, one partition: AQE only adds stages
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def analyzed(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Truth, dict[str, Any], Path]:
    """``(truth, summary, out)``: the job's run on 400 generated root requests (seed 11)."""
    from gear.pipeline.job import analyze
    from gear.testing.traces.generate import generate

    base = tmp_path_factory.mktemp("analyzed")
    truth = generate(base / "traces", roots=400, seed=11)
    summary = analyze(spark, base / "traces", base / "out")
    return truth, summary, base / "out"

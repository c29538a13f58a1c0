"""A session-scoped local Spark session for the pipeline tests (skipped without Java or PySpark)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/pipeline" in str(item.fspath):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """``local[1]``, one shuffle partition, no UI: the cheapest JVM that runs the real job."""
    if shutil.which("java") is None:
        pytest.skip("Java is not installed; the Spark tests need a JRE 17+")
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        pytest.skip("PySpark is not installed: pip install 'gear-rpc[spark]'")
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

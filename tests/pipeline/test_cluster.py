"""The job on a real Spark cluster: a standalone master and worker started from the pyspark installation
(no Docker), ``gear traces analyze --master spark://127.0.0.1:PORT`` on the same input as local mode,
and every table identical (doubles compared to 12 significant digits: sums of doubles may add up in a
different order on another partitioning).

Kept cheap, as it costs four JVMs (master, worker, the driver, its executor): master and worker start
at once on ports chosen beforehand (the worker retries until the master listens), daemons and the
executor get small heaps and one core, the input is small (it still has every kind of row), and the
job runs once on the cluster; the local-mode side reuses the tests' session.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

_READY = 120.0


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _wait_for(log: Path, pattern: str, proc: subprocess.Popen[bytes]) -> re.Match[str]:
    deadline = time.monotonic() + _READY
    while time.monotonic() < deadline:
        found = re.search(pattern, log.read_text(errors="replace")) if log.exists() else None
        if found:
            return found
        if proc.poll() is not None:
            raise RuntimeError(f"{log.name} exited: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.5)
    raise TimeoutError(f"no {pattern!r} in {log} within {_READY:g}s")


def _daemon(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [str(_spark_home() / "bin" / "spark-class"), *args], stdout=out, stderr=subprocess.STDOUT, env=env
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``spark://127.0.0.1:PORT`` of a one-worker, one-core standalone cluster on this machine."""
    base = tmp_path_factory.mktemp("spark-cluster")
    env = {
        **os.environ,
        "SPARK_HOME": str(_spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
    }
    url = f"spark://127.0.0.1:{_free_port()}"
    master = _daemon(
        ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", url.rsplit(":", 1)[1],
         "--webui-port", "0"],
        base / "master.log",
        env,
    )  # fmt: skip
    worker: subprocess.Popen[bytes] | None = None
    try:
        worker = _daemon(
            ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--port", "0",
             "--webui-port", "0", "--cores", "1", "--memory", "768m", "--work-dir", str(base / "work")],
            base / "worker.log",
            env,
        )  # fmt: skip
        _wait_for(base / "master.log", r"Starting Spark master at spark://", master)
        _wait_for(base / "worker.log", r"Successfully registered with master", worker)
        yield url
    finally:
        for proc in (worker, master):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(30)


def _rows(spark: Any, path: Path) -> list[tuple[Any, ...]]:
    def norm(value: Any) -> Any:
        return float(f"{value:.12g}") if isinstance(value, float) else value

    table = spark.read.parquet(str(path))
    rows = [tuple(norm(v) for v in row) for row in table.collect()]
    return sorted(rows, key=repr)


def test_cluster_run_gives_the_same_tables_as_local_mode(
    spark: Any, cluster: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from gear.pipeline import TABLE_NAMES
    from gear.pipeline.job import analyze
    from gear.testing.traces.generate import generate

    base = tmp_path_factory.mktemp("cluster-run")
    generate(base / "traces", roots=40, seed=5)
    small = {
        "spark.sql.shuffle.partitions": "2",
        "spark.cores.max": "1",
        "spark.executor.cores": "1",
        "spark.executor.memory": "512m",
        "spark.driver.memory": "512m",
        "spark.ui.enabled": "false",
    }
    command = [
        sys.executable, "-c", "from gear.cli.main import app; app()", "traces", "analyze",
        str(base / "traces"), "--out", str(base / "cluster"), "--master", cluster, "--json",
        *[arg for key, value in small.items() for arg in ("--conf", f"{key}={value}")],
    ]  # fmt: skip
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    out, err = base / "stdout", base / "stderr"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        # the cluster run starts first; the local-mode run overlaps with its JVM start-up
        driver = subprocess.Popen(command, stdout=stdout, stderr=stderr, env=env)
        try:
            local = analyze(spark, base / "traces", base / "local")
            code = driver.wait(480)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait(30)
    assert code == 0, err.read_text(errors="replace")[-3000:]
    assert all(local["tables"][name]["rows"] > 0 for name in TABLE_NAMES), local["tables"]  # no empty "same"
    remote = json.loads(out.read_text())
    assert remote["spark"]["master"] == cluster
    assert remote["data_quality"] == local["data_quality"]
    for name in TABLE_NAMES:
        assert _rows(spark, base / "cluster" / name) == _rows(spark, base / "local" / name), name

"""The ``gear traces analyze`` job: trace files in, Parquet tables + ``summary.json`` + ``report.html`` out.

Run it through the CLI (``gear traces analyze PATH --out DIR [--master URL]``), from Python
(:func:`analyze` with your own ``SparkSession``), or with spark-submit on any master::

    spark-submit --master 'local[2]' --driver-memory 2g gear/pipeline/job.py /traces --out /tmp/gear-report
    spark-submit --master spark://HOST:7077 --deploy-mode client gear/pipeline/job.py \\
        hdfs:///gear/traces --out hdfs:///gear/report

The job is DataFrame expressions only (no Python UDFs, no Python RDDs), so executors need nothing but
Spark; the driver needs ``pip install 'gear-rpc[spark]'`` with the cluster's Spark version, and the input
must be readable by every executor (HDFS, S3, NFS: files left on each node's local disk only work in
local mode). Parquet tables go to ``--out`` (any Hadoop URL); ``summary.json``, ``dependencies.json``
(Zipkin's parent/child/callCount/errorCount) and ``report.html`` go there too when it is a local path,
else to ``./gear-report``.

``--since``/``--until`` select calls by the caller's first publish time (their later events are still
used, so a call near the end keeps its outcome), deliveries by delivery time, and blocked periods and
reconnects by their start; corrupt lines and orphans are counted over the whole input.

Traces from instances that sample (``gear.trace.sample_rate`` in their resource) are scaled up: each
recorded trace counts 1/rate, so the tables' counts are estimates of the whole traffic, and the
summary's ``sampling`` entry (None when nothing was sampled) gives the rates, the estimated totals and
a note the report and the CLI show. The data-quality row stays raw: it counts what the files hold.

Every table is written with ``mode("overwrite")`` and the summary and report are rewritten, so running
again on the same input replaces the previous results and never adds to them.

Unless under spark-submit, the driver JVM's own output (its start-up banner, warnings, Spark's log at
``GEAR_SPARK_LOG_LEVEL``) goes to ``spark.log`` beside the report instead of the terminal. An input of at most
:data:`SMALL_INPUT_BYTES` (a demo, a test, a few minutes of traces) runs with a profile made for a
short-lived JVM: HotSpot's quick C1 compiler only (the optimising C2 compiler spent more CPU compiling
Spark's classes than the whole analysis needed), no adaptive query execution and no broadcast joins
(each adds Spark jobs that cost more than they save on tiny tables), one shuffle partition and no
whole-stage code generation. ``python benchmarks/pipeline.py --cold`` measures both profiles side by
side: on 400 generated events, 22 Spark jobs instead of 56 and about 30 JVM CPU seconds instead of 55.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark import SparkConf, SparkContext, StorageLevel
from pyspark.java_gateway import launch_gateway
from pyspark.sql import DataFrame, SparkSession, functions as sf

from gear.pipeline import STAGES, TABLE_NAMES, SparkMissingError
from gear.pipeline.calls import CallTotals, build_calls, call_totals, dependency_links, latency, route_rates
from gear.pipeline.connection import blocked_periods, reconnects
from gear.pipeline.delivery import duplicate_deliveries, orphan_deliveries, redeliveries
from gear.pipeline.load import Loaded, estimate, load_events, resolve_paths
from gear.pipeline.quality import data_quality
from gear.pipeline.report import sampling_note, write_report
from gear.pipeline.tables import BY_NAME, TABLES as TABLE_SPECS
from gear.pipeline.timeline import choose_bucket_ms, timeline

__all__ = (
    "LOCAL_REPORT_DIR",
    "PROFILES",
    "SMALL_INPUT_BYTES",
    "SORT_KEYS",
    "SPARK_LOG",
    "TABLES",
    "analyze",
    "input_bytes",
    "main",
    "run",
    "spark_session",
    "use_small_profile",
)

TABLES = TABLE_NAMES
"""The Parquet tables written under ``--out``, one directory each."""

SORT_KEYS: dict[str, tuple[str, ...]] = {table.name: table.order for table in TABLE_SPECS}
"""Row order of each table."""

_SUMMARY_ROWS = 200
_SUMMARY_ROWS_BY_TABLE = {"timeline": 20_000}
"""The time axis is drawn whole (at most ~60 buckets per callee); other tables are sampled."""

LOCAL_REPORT_DIR = "gear-report"
"""Where ``summary.json`` and ``report.html`` go when ``--out`` is not a local path (HDFS, S3...)."""

_APP = "gear-traces-analyze"

SPARK_LOG = "spark.log"
"""The file beside the report that receives the local JVM's output."""

SMALL_INPUT_BYTES = 32 * 2**20
"""Local inputs up to this size (about 75 000 events) run with the short-lived-JVM profile (measured with
``benchmarks/pipeline.py --cold --events 45000``: 34 JVM CPU seconds for 19 MB against the default
profile's 60).
``GEAR_SPARK_PROFILE`` = ``small`` or ``default`` overrides the choice (``auto``, the default, keeps it)."""

PROFILES = ("auto", "small", "default")
"""The values of ``GEAR_SPARK_PROFILE``."""


def _ns(moment: datetime | None) -> int | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1_000_000) * 1000


def analyze(
    spark: SparkSession,
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    since: datetime | None = None,
    until: datetime | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the analysis with ``spark``; write the outputs to ``out``; return the summary.

    Raises:
        FileNotFoundError: if a local input path does not exist.
    """
    say = progress or (lambda _message: None)
    started = time.monotonic()
    inputs = resolve_paths(paths)
    target = os.fspath(out)
    since_ns, until_ns = _ns(since), _ns(until)
    say(STAGES[1])
    loaded = load_events(spark, inputs)
    events = loaded.events
    say(STAGES[2])
    calls, caller_orphans, per_request = build_calls(events, since_ns, until_ns)
    totals = call_totals(calls)
    first_t, last_t = totals.first_t, totals.last_t
    bucket_ms = choose_bucket_ms((last_t or 0) - (first_t or 0))
    tables: dict[str, DataFrame] = {
        "dependency_links": dependency_links(calls, events),
        "latency": latency(calls),
        "timeline": timeline(calls, bucket_ms),
        "route_rates": route_rates(calls),
        "duplicate_deliveries": duplicate_deliveries(_window(events, since_ns, until_ns)),
        "redeliveries": redeliveries(_window(events, since_ns, until_ns)),
        "blocked_periods": blocked_periods(events, since_ns, until_ns),
        "reconnects": reconnects(events, since_ns, until_ns),
    }
    tables["data_quality"] = data_quality(spark, loaded, totals, caller_orphans, orphan_deliveries(events))
    summary: dict[str, Any] = {
        "inputs": inputs,
        "out": target,
        "since": since.isoformat() if since else None,
        "until": until.isoformat() if until else None,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "spark": {"version": spark.version, "master": spark.sparkContext.master},
        "time_range_ns": [first_t, last_t],
        "calls": totals.breakdown(),
        "timeline_bucket_ms": bucket_ms,
        "sampling": _sampling(loaded, totals, tables["duplicate_deliveries"]),
        "tables": {},
    }
    for name, df in tables.items():
        say(f"writing {name}")
        limit = _SUMMARY_ROWS_BY_TABLE.get(name, _SUMMARY_ROWS)
        summary["tables"][name] = _write(
            df.select(*BY_NAME[name].columns), _join(target, name), SORT_KEYS[name], limit
        )
    quality = summary["tables"]["data_quality"]["sample"]
    summary["data_quality"] = quality[0] if quality else {}
    summary["zipkin_links"] = [
        {k: row[k] for k in ("parent", "child", "callCount", "errorCount")}
        for row in summary["tables"]["dependency_links"]["sample"]
    ]
    calls.unpersist()
    per_request.unpersist()
    loaded.cached.unpersist()
    summary["seconds"] = round(time.monotonic() - started, 3)
    local = _local_dir(target)
    local.mkdir(parents=True, exist_ok=True)
    summary["report"] = str(local / "report.html")
    (local / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    (local / "dependencies.json").write_text(json.dumps(summary["zipkin_links"], indent=2) + "\n")
    say(STAGES[-2])
    write_report(local / "report.html", summary)
    say(STAGES[-1])
    return summary


def _sampling(loaded: Loaded, totals: CallTotals, duplicates: DataFrame) -> dict[str, Any] | None:
    """The summary's ``sampling`` entry: None when no instance sampled, else rates and estimated totals."""
    rates = loaded.sample_rates
    if not rates:
        return None
    row = duplicates.agg(estimate().alias("n")).first()
    assert row is not None
    entry: dict[str, Any] = {
        "rate": min(rates.values()),
        "rates": rates,
        "estimated_calls": totals.estimated_calls,
        "estimated_duplicate_requests": int(row["n"]),
    }
    entry["note"] = sampling_note(entry, loaded.instances)
    return entry


def _write(df: DataFrame, path: str, order: tuple[str, ...], limit: int) -> dict[str, Any]:
    """Write one table (a single sorted Parquet file: outputs are aggregates) and sample it."""
    table = df.coalesce(1)
    if order:
        table = table.sortWithinPartitions(*order)
    table = table.persist(StorageLevel.MEMORY_AND_DISK)
    table.write.mode("overwrite").parquet(path)
    rows = [row.asDict(recursive=True) for row in table.limit(limit).collect()]
    count = len(rows) if len(rows) < limit else table.count()
    table.unpersist()
    return {"rows": count, "sample": rows}


def _local_dir(target: str) -> Path:
    """Where the summary and the report go: ``target`` if it is local, else :data:`LOCAL_REPORT_DIR`."""
    local = Path(target) if "://" not in target or target.startswith("file://") else Path(LOCAL_REPORT_DIR)
    return Path(str(local).removeprefix("file:"))


def _window(events: DataFrame, since_ns: int | None, until_ns: int | None) -> DataFrame:
    if since_ns is not None:
        events = events.filter(sf.col("t") >= since_ns)
    if until_ns is not None:
        events = events.filter(sf.col("t") < until_ns)
    return events


def _join(base: str, name: str) -> str:
    return f"{base.rstrip('/')}/{name}"


_LOG4J2 = """rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{HH:mm:ss}} %p %c{{1}}: %m%n
"""


_JIT = "-XX:MaxInlineLevel=9 -XX:InlineSmallCode=1000 -XX:+UseParallelGC"
"""Local-mode JVM options. Every query compiles new classes (Spark's generated code), and HotSpot's C2
compiler spent about as much CPU compiling them as the tasks spent running (about 20 s each for a
million events); the smaller inlining limits HotSpot used before JDK 14 cut that by about a quarter
without slowing the tasks. The throughput collector has no concurrent threads competing with them."""

_JIT_SMALL = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""Local-mode JVM options for a small input: C1 only, and the collector with no threads of its own."""

_SMALL_CONF = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.codegen.wholeStage": "false",
}
"""Spark properties for a small input (see the module docstring)."""


def _log_config() -> str:
    """A log4j2 file that keeps the local JVM quiet (level ``GEAR_SPARK_LOG_LEVEL``, default ERROR)."""
    level = os.environ.get("GEAR_SPARK_LOG_LEVEL", "ERROR").lower()
    path = Path(tempfile.gettempdir()) / f"gear-spark-log4j2-{level}.properties"
    if not path.exists():
        path.write_text(_LOG4J2.format(level=level))
    return str(path)


def input_bytes(paths: Sequence[str]) -> int | None:
    """The total size of the ``*.jsonl`` files under local ``paths``; None if any path is a URL."""
    total = 0
    for text in paths:
        if "://" in text and not text.startswith("file://"):
            return None
        path = Path(text.removeprefix("file://"))
        files = path.rglob("*.jsonl") if path.is_dir() else [path]
        total += sum(f.stat().st_size for f in files if f.is_file())
    return total


def use_small_profile(inputs: Sequence[str]) -> bool:
    """Whether to run with the short-lived-JVM profile: ``GEAR_SPARK_PROFILE``, else the input's size.

    Raises:
        ValueError: if ``GEAR_SPARK_PROFILE`` is not one of :data:`PROFILES`.
    """
    chosen = os.environ.get("GEAR_SPARK_PROFILE", "auto").strip().lower() or "auto"
    if chosen not in PROFILES:
        raise ValueError(f"GEAR_SPARK_PROFILE must be one of {', '.join(PROFILES)}, not {chosen!r}")
    if chosen != "auto":
        return chosen == "small"
    size = input_bytes(inputs)
    return size is not None and size <= SMALL_INPUT_BYTES


def _local_options(small: bool) -> dict[str, str]:
    """Spark properties of Gear's local mode; ``small`` adds the short-lived-JVM profile."""
    # One JVM does everything in local mode: room for the uncompressed cache of parsed events
    # (compressing it costs more CPU than parsing the JSON), few shuffle partitions, input splits
    # small enough to keep every core busy to the end of the read.
    java_options = f"-Dlog4j.configurationFile={_log_config()} {_JIT_SMALL if small else _JIT}"
    options = {
        "spark.driver.extraJavaOptions": java_options,
        "spark.driver.memory": "2g",
        "spark.sql.files.maxPartitionBytes": "32m",
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.enabled": "false",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
    }
    return options | (_SMALL_CONF if small else {})


def _start_jvm(master: str, options: dict[str, str], log: Path) -> None:
    """Start the driver's JVM with its stdout and stderr in ``log``, unless this process already has one.

    Raises:
        SparkMissingError: if the JVM exits before it is ready (the reason is in ``log``).
    """
    # a second gateway would start a second JVM: reuse the running one (through its active session)
    if SparkSession.getActiveSession() is not None:
        return
    conf = SparkConf(loadDefaults=False).setMaster(master).setAppName(_APP).setAll(list(options.items()))
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as sink:
        try:
            streams = {"stdout": sink, "stderr": sink}
            launch: Any = launch_gateway  # untyped in pyspark (and Any where pyspark is not installed)
            gateway = launch(conf, popen_kwargs=streams)
        except RuntimeError as exc:  # PySparkRuntimeError JAVA_GATEWAY_EXITED
            raise SparkMissingError(f"Spark's JVM did not start; its output is in {log}") from exc
    SparkContext(conf=conf, gateway=gateway)


def spark_session(
    master: str | None = None,
    conf: dict[str, str] | None = None,
    *,
    small: bool = False,
    log: Path | None = None,
) -> SparkSession:
    """A session for the job: ``master`` if given, else spark-submit's, else ``SPARK_MASTER`` or ``local[*]``.

    Under spark-submit the master and configuration come from its command line and are not overridden;
    ``conf`` (Spark properties) is applied last, so it wins over Gear's local-mode defaults. In local
    mode, ``small`` picks the short-lived-JVM profile. Unless under spark-submit, ``log`` receives the
    driver JVM's output (else it goes to this process's stdout and stderr).

    Raises:
        SparkMissingError: if the local JVM does not start.
    """
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ
    chosen = master or (None if under_submit else os.environ.get("SPARK_MASTER", "local[*]"))
    options: dict[str, str] = {}
    if chosen and chosen.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no "hostname resolves to loopback" warning
        options = _local_options(small)
    options |= {"spark.ui.showConsoleProgress": "false", "spark.sql.session.timeZone": "UTC"}
    options |= conf or {}
    if chosen and log is not None:  # not under spark-submit: this process starts the driver's JVM
        _start_jvm(chosen, options, log)
    builder = SparkSession.builder.appName(_APP)
    if chosen:
        builder = builder.master(chosen)
    for key, value in options.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("GEAR_SPARK_LOG_LEVEL", "ERROR"))
    return spark


def run(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    master: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    progress: Callable[[str], None] | None = None,
    conf: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Start (or reuse) a session, run :func:`analyze`, and add the start-up time to the summary.

    A local input of at most :data:`SMALL_INPUT_BYTES` gets the short-lived-JVM profile; the driver
    JVM's output goes to :data:`SPARK_LOG` beside the report.

    Raises:
        FileNotFoundError: if a local input path does not exist.
        SparkMissingError: if the local JVM does not start.
    """
    inputs = resolve_paths(path)
    say = progress or (lambda _message: None)
    say(STAGES[0])
    started = time.monotonic()
    small = use_small_profile(inputs)
    log = _local_dir(os.fspath(out)) / SPARK_LOG
    spark = spark_session(master, conf, small=small, log=log)
    startup = time.monotonic() - started
    summary = analyze(spark, path, out, since=since, until=until, progress=progress)
    summary["spark_startup_seconds"] = round(startup, 3)
    local = (spark.sparkContext.master or "").startswith("local")
    summary["spark_profile"] = "small input" if small and local else "default"
    return summary


def _when(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def main(argv: list[str] | None = None) -> None:
    """Entry point for ``spark-submit gear/pipeline/job.py PATH... --out DIR``."""
    parser = argparse.ArgumentParser(prog="gear-traces-analyze", description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+", help="trace files or directories (local, hdfs://, s3a://)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--master", default=None)
    parser.add_argument("--conf", action="append", default=[], help="KEY=VALUE Spark property (repeatable)")
    parser.add_argument("--since", default=None, help="ISO time; calls first published at or after it")
    parser.add_argument("--until", default=None, help="ISO time; calls first published before it")
    args = parser.parse_args(argv)
    summary = run(
        args.paths,
        args.out,
        master=args.master,
        since=_when(args.since),
        until=_when(args.until),
        progress=lambda m: print(f"gear traces: {m}", flush=True),
        conf=dict(item.split("=", 1) for item in args.conf),
    )
    quality = summary["data_quality"]
    found = {"links": summary["zipkin_links"], "data_quality": quality, "sampling": summary["sampling"]}
    print(json.dumps(found, default=str))


if __name__ == "__main__":
    main()

"""Benchmark: ``gear traces analyze`` on generated events, local mode, at one or several sizes.

    python benchmarks/pipeline.py [--events 1000000] [--master 'local[2]'] [--dir /tmp/gear-bench]
    python benchmarks/pipeline.py --events 1000000,2000000,5000000     # how time grows with size

For each size: the generator writes the events, then one analysis runs (reading, all tables, writing
Parquet, summary and report). Printed per size: the JVM/session start-up time apart from the analysis
time, the events per second, and whether the dependency links equal the generator's truth (a fast but
wrong run does not count), the seconds per stage, the driver JVM's CPU seconds for the analysis (Linux;
steadier than wall time on a shared machine: on 2 idle cores the wall time is about half of it or more)
and the load average before and after (on a shared machine it explains most of the spread). A small
unmeasured analysis runs first (``--warmup``): the session's
first one pays one-off costs. With several sizes a table follows with the seconds per million events
relative to the smallest size: 1.00x everywhere is linear.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from gear.pipeline import STAGES, run_analyze
from gear.testing.traces.generate import generate

__all__ = ("main", "measure", "scale_table")


def _jvm_cpu_seconds() -> float | None:
    """CPU seconds (user + system) the driver JVM has used so far; None where /proc is missing."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None) if gateway is not None else None
    stat = Path(f"/proc/{proc.pid}/stat") if proc is not None else None
    if stat is None or not stat.exists():
        return None
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(events: int, master: str, base: Path, conf: dict[str, str] | None = None) -> dict[str, Any]:
    """Generate ``events`` events under ``base``, analyse them once; returns the figures."""
    traces, out = base / f"traces-{events}", base / "out"
    started = time.monotonic()
    if traces.exists():
        shutil.rmtree(traces)
    truth = generate(traces, events=events, seed=1)
    generated = time.monotonic() - started
    size = sum(p.stat().st_size for p in traces.iterdir())
    mb, calls = size / 1e6, len(truth.calls)
    note = f"generated {truth.lines:,} lines ({mb:,.0f} MB, {calls:,} calls) in {generated:.1f} s"
    print(note, file=sys.stderr)
    stages: dict[str, float] = {}
    last: list[tuple[float, str]] = [(time.monotonic(), "start")]
    cpu: dict[str, float] = {}

    def progress(message: str) -> None:
        now = time.monotonic()
        since, stage = last[0]
        stages[stage] = round(now - since, 1)
        last[0] = (now, message)
        if message == STAGES[1]:  # the JVM is up: its CPU from here on is the analysis
            cpu["start"] = _jvm_cpu_seconds() or 0.0
        elif message == STAGES[-2]:
            cpu["end"] = _jvm_cpu_seconds() or 0.0

    load_before = os.getloadavg()
    summary = run_analyze(traces, out, master=master, progress=progress, conf=conf)
    expected = {f"{a}->{b}": v["calls"] for (a, b), v in truth.links().items()}
    got = {f"{r['parent']}->{r['child']}": r["callCount"] for r in summary["zipkin_links"]}
    shutil.rmtree(traces, ignore_errors=True)
    return {
        "events": summary["data_quality"]["lines"],
        "master": summary["spark"]["master"],
        "spark_startup_s": summary["spark_startup_seconds"],
        "analysis_s": summary["seconds"],
        "events_per_s": round(summary["data_quality"]["lines"] / summary["seconds"]),
        "links_match_truth": got == expected,
        "analysis_jvm_cpu_s": round(cpu["end"] - cpu["start"], 1) if cpu.get("end") else None,
        "stage_seconds": stages,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


def scale_table(results: list[dict[str, Any]]) -> str:
    """The README's table: events, analysis seconds, events/s, seconds per million vs the first row."""
    lines = [
        "| events | analysis s | analysis JVM CPU s | JVM start s | events/s | s per million (vs first) "
        "| load before/after | links = truth |",
        "|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    first = results[0]["analysis_s"] / results[0]["events"] * 1e6
    for row in results:
        per_million = row["analysis_s"] / row["events"] * 1e6
        lines.append(
            f"| {row['events']:,} | {row['analysis_s']:.1f} | {row['analysis_jvm_cpu_s'] or '-'} | "
            f"{row['spark_startup_s']:.1f} | {row['events_per_s']:,} | "
            f"{per_million:.1f} ({per_million / first:.2f}x) | "
            f"{row['load_average_before'][0]:.1f}/{row['load_average_after'][0]:.1f} | "
            f"{'yes' if row['links_match_truth'] else 'NO'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    """Generate, analyse, report; returns the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", default="1000000", help="comma-separated sizes, e.g. 1000000,2000000")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--dir", default="/tmp/gear-bench")
    parser.add_argument("--driver-memory", default="", help="spark.driver.memory (local mode: the heap)")
    parser.add_argument(
        "--warmup", type=int, default=20_000, help="events analysed first, unmeasured; 0: none"
    )
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.events.split(",") if x.strip()]
    conf = {"spark.driver.memory": args.driver_memory} if args.driver_memory else None
    if args.warmup:  # the session's first analysis pays one-off costs (JIT, class loading): not measured
        measure(args.warmup, args.master, Path(args.dir), conf)
    results = []
    for events in sizes:
        result = measure(events, args.master, Path(args.dir), conf)
        print(json.dumps(result, indent=2), file=sys.stderr, flush=True)
        results.append(result)
    table = f"master {results[0]['master']}, generated events (seed 1), one analysis per size\n\n"
    table += scale_table(results)
    print(table)
    return table


if __name__ == "__main__":
    main()

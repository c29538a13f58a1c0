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
relative to the smallest size: 1.00x everywhere is linear. These runs use the default Spark profile
(``GEAR_SPARK_PROFILE=default``), whatever the size.

    python benchmarks/pipeline.py --cold [--events 400] [--rounds 2]

measures what ``gear demo --report`` or a first ``gear traces analyze`` of a few hundred events costs: a
fresh process and JVM per run, the default profile against the small-input one (``gear.pipeline.job``)
side by side, in alternation. Printed per run: the session start-up and analysis seconds, the JVM's CPU
seconds (start-up included), the number of Spark jobs and whether the links equal the truth.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gear.pipeline import STAGES, run_analyze
from gear.testing.traces.generate import generate

__all__ = ("cold_table", "main", "measure", "measure_cold", "scale_table")


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
    """The docs' table: events, analysis seconds, events/s, seconds per million vs the first row.

    No JVM start-up column: the sizes share one session, so only the first analysis (the warmup's)
    starts the JVM; the header says how long that took."""
    lines = [
        "| events | analysis s | analysis JVM CPU s | events/s | s per million (vs first) "
        "| load before/after | links = truth |",
        "|---:|---:|---:|---:|---:|---|---|",
    ]
    first = results[0]["analysis_s"] / results[0]["events"] * 1e6
    for row in results:
        per_million = row["analysis_s"] / row["events"] * 1e6
        lines.append(
            f"| {row['events']:,} | {row['analysis_s']:.1f} | {row['analysis_jvm_cpu_s'] or '-'} | "
            f"{row['events_per_s']:,} | "
            f"{per_million:.1f} ({per_million / first:.2f}x) | "
            f"{row['load_average_before'][0]:.1f}/{row['load_average_after'][0]:.1f} | "
            f"{'yes' if row['links_match_truth'] else 'NO'} |"
        )
    return "\n".join(lines)


def _cold_run(profile: str, traces: str, out: str) -> None:
    """One analysis in this (fresh) process with ``profile``; prints its figures as one JSON line."""
    os.environ["GEAR_SPARK_PROFILE"] = profile
    from pyspark.sql import SparkSession

    summary = run_analyze(traces, out, master="local[*]")
    session = SparkSession.getActiveSession()
    assert session is not None
    print(
        json.dumps(
            {
                "profile": summary["spark_profile"],
                "events": summary["data_quality"]["lines"],
                "startup_s": summary["spark_startup_seconds"],
                "analysis_s": summary["seconds"],
                "jvm_cpu_s": _jvm_cpu_seconds(),
                "spark_jobs": len(session.sparkContext.statusTracker().getJobIdsForGroup()),
                "calls": summary["calls"]["total"],
                "load": round(os.getloadavg()[0], 1),
            }
        )
    )


def measure_cold(events: int, base: Path, rounds: int) -> list[dict[str, Any]]:
    """Generate ``events`` events; analyse them ``rounds`` times per profile, each in a fresh process."""
    traces = base / f"traces-cold-{events}"
    if traces.exists():
        shutil.rmtree(traces)
    truth = generate(traces, events=events, seed=1)
    expected = {f"{a}->{b}": v["calls"] for (a, b), v in truth.links().items()}
    results = []
    for _ in range(rounds):
        for profile in ("default", "small"):
            out = base / f"out-cold-{profile}"
            done = subprocess.run(
                [sys.executable, __file__, "--cold-run", profile, str(traces), str(out)],
                capture_output=True,
                text=True,
                check=True,
                timeout=600,
            )
            row = json.loads(done.stdout.strip().splitlines()[-1])
            links = json.loads((out / "dependencies.json").read_text())
            row["links_match_truth"] = {
                f"{r['parent']}->{r['child']}": r["callCount"] for r in links
            } == expected
            print(json.dumps(row), file=sys.stderr, flush=True)
            results.append(row)
    return results


def cold_table(results: list[dict[str, Any]]) -> str:
    """One row per cold run."""
    lines = [
        "| profile | events | JVM start s | analysis s | JVM CPU s | Spark jobs | load | links = truth |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in results:
        lines.append(
            f"| {row['profile']} | {row['events']:,} | {row['startup_s']:.1f} | {row['analysis_s']:.1f} | "
            f"{row['jvm_cpu_s'] or '-'} | {row['spark_jobs']} | {row['load']:.1f} | "
            f"{'yes' if row['links_match_truth'] else 'NO'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    """Generate, analyse, report; returns the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--events",
        default=None,
        help="comma-separated sizes, e.g. 1000000,2000000 (default 1000000; --cold: 400)",
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--dir", default="/tmp/gear-bench")
    parser.add_argument("--driver-memory", default="", help="spark.driver.memory (local mode: the heap)")
    parser.add_argument(
        "--warmup", type=int, default=20_000, help="events analysed first, unmeasured; 0: none"
    )
    parser.add_argument("--cold", action="store_true", help="default vs small-input profile, fresh JVMs")
    parser.add_argument("--rounds", type=int, default=2, help="--cold: runs per profile")
    parser.add_argument("--cold-run", nargs=3, metavar=("PROFILE", "TRACES", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cold_run:
        _cold_run(*args.cold_run)
        return ""
    if args.cold:
        events = int(args.events or 400)
        table = f"cold runs, master local[*], {events:,} generated events (seed 1)\n\n"
        table += cold_table(measure_cold(events, Path(args.dir), args.rounds))
        print(table)
        return table
    os.environ.setdefault("GEAR_SPARK_PROFILE", "default")  # the JVM options do not change with the size
    sizes = [int(x) for x in (args.events or "1000000").split(",") if x.strip()]
    conf = {"spark.driver.memory": args.driver_memory} if args.driver_memory else None
    started: float | None = None  # the JVM and session start-up, paid by the first analysis only
    if args.warmup:  # the session's first analysis pays one-off costs (JIT, class loading): not measured
        started = measure(args.warmup, args.master, Path(args.dir), conf)["spark_startup_s"]
    results = []
    for events in sizes:
        result = measure(events, args.master, Path(args.dir), conf)
        print(json.dumps(result, indent=2), file=sys.stderr, flush=True)
        started = result["spark_startup_s"] if started is None else started
        results.append(result)
    warmup = f" after a {args.warmup:,}-event warmup" if args.warmup else ""
    table = (
        f"master {results[0]['master']}, generated events (seed 1), one analysis per size{warmup}, in one "
        f"session: the JVM and the session started once, in {started:.1f} s (not in the times below)\n\n"
    )
    table += scale_table(results)
    print(table)
    return table


if __name__ == "__main__":
    main()

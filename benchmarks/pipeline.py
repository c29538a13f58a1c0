"""Benchmark: ``gear traces analyze`` on about one million generated events, local mode.

    python benchmarks/pipeline.py [--events 1000000] [--master 'local[2]'] [--dir /tmp/gear-bench]

Prints the JVM/session start-up time separately from the analysis time (reading, all tables, writing
Parquet, summary and report), the seconds per stage, the driver JVM's CPU seconds for the analysis
(Linux; steadier than wall time on a shared machine: on 2 idle cores the wall time is about half of it
or more), the events per second, and checks the dependency links against the
generator's truth, so a fast but wrong run does not count. The machine's load average (1, 5, 15 min)
before and after is printed with the figures: on a shared machine it explains most of the spread.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

from gear.pipeline import STAGES, run_analyze
from gear.testing.traces.generate import generate

__all__ = ("main",)


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


def main() -> None:
    """Generate, analyse, report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--dir", default="/tmp/gear-bench")
    args = parser.parse_args()
    base = Path(args.dir)
    traces, out = base / f"traces-{args.events}", base / "out"
    started = time.monotonic()
    if traces.exists():
        shutil.rmtree(traces)
    truth = generate(traces, events=args.events, seed=1)
    generated = time.monotonic() - started
    size = sum(p.stat().st_size for p in traces.iterdir())
    mb = size / 1e6
    print(f"generated {truth.lines:,} lines ({mb:,.0f} MB, {len(truth.calls):,} calls) in {generated:.1f} s")
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
    summary = run_analyze(traces, out, master=args.master, progress=progress)
    expected = {f"{a}->{b}": v["calls"] for (a, b), v in truth.links().items()}
    got = {f"{r['parent']}->{r['child']}": r["callCount"] for r in summary["zipkin_links"]}
    result = {
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
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

"""Benchmark: ``gear traces analyze`` on about one million generated events, local mode.

    python benchmarks/pipeline.py [--events 1000000] [--master 'local[2]'] [--dir /tmp/gear-bench]

Prints the JVM/session start-up time separately from the analysis time (reading, all tables, writing
Parquet, summary and report), the events per second, and checks the dependency links against the
generator's truth, so a fast but wrong run does not count.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from gear.pipeline import run_analyze
from gear.pipeline.generate import generate

__all__ = ("main",)


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

    def progress(message: str) -> None:
        now = time.monotonic()
        since, stage = last[0]
        stages[stage] = round(now - since, 1)
        last[0] = (now, message)

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
        "stage_seconds": stages,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

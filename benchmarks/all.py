"""Run every benchmark the docs quote and print its tables; optionally rewrite the docs' blocks.

    python benchmarks/all.py --quick                    # a few minutes of load; prints the tables
    python benchmarks/all.py                            # the full settings (much longer)
    python benchmarks/all.py --quick --write-docs       # also replace the generated blocks in docs/
    python benchmarks/all.py --only rpc,broker          # a subset (--skip pipeline: all but that)

Each benchmark runs as its own process (``python benchmarks/NAME.py ...``, so none shares an event
loop or a warmed-up interpreter with another) and prints its table in the docs' markdown format.
The output starts with the machine: date (UTC), cores, load average, Python, the RabbitMQ and
reference broker versions.

The docs mark every generated block with a pair of comments, ``<!-- bench:NAME -->`` and
``<!-- /bench:NAME -->`` (all in ``docs/benchmarks.md`` today); ``--write-docs`` (or its old name,
``--write-readme``) replaces what lies between them, in whichever page of ``docs/`` (or README.md)
holds them: the command that produced it, then its output. Everything else is left alone.
Benchmarks that need something this machine may lack are skipped with the reason: the pipeline
needs PySpark and Java; ``faults.py`` and ``cluster.py`` need a disposable broker or a 3-node
cluster and are run by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ("BENCHMARKS", "PAGES", "main", "replace_blocks", "write_blocks")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


PAGES = _pages()
"""The Markdown files whose ``bench:NAME`` blocks ``--write-docs`` replaces."""
RABBITMQ = os.environ.get("GEAR_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")


def _metrics(out: str) -> str:
    """metrics_overhead.py prints progress, then a JSON object: turn it into a table."""
    result = json.loads(out[out.index("{") :])
    rows = [
        "| metrics | calls/s | overhead vs off (calls/s) | CPU us per call | overhead vs off (CPU) |",
        "|---|---:|---:|---:|---:|",
        f"| off | {result['off_calls_per_s']:,} | - | {result['off_cpu_us_per_call']} | - |",
    ]
    for label, side in (
        ("Prometheus (--metrics-port, scraped)", "prometheus"),
        ("OpenTelemetry SDK", "otel"),
    ):
        calls, cpu = result[f"overhead_{side}_per_round"], result[f"cpu_overhead_{side}_per_round"]
        rows.append(
            f"| {label} | {result[side + '_calls_per_s']:,} | {calls:+.1%} | "
            f"{result[side + '_cpu_us_per_call']} | {cpu:+.1%} |"
        )
    rows += [
        "",
        f"{result['calls_per_round']:,} calls per side per round at {result['concurrency']} in flight, "
        f"{result['rounds']} rounds; both instances measured, scraped (or collected) every "
        f"{result['scrape_every_s']:g} s; overheads are the median of each round's own ratio to `off`",
    ]
    return "\n".join(rows) + "\n"


def _tracing(out: str) -> str:
    """tracing_overhead.py prints progress, then a JSON object: turn it into a table."""
    result = json.loads(out[out.index("{") :])
    every = (
        ("JSONL events", "jsonl", "jsonl"),
        ("JSONL + OpenTelemetry API (no SDK)", "jsonl+otel-api", "jsonl_otel_api"),
        ("JSONL + OpenTelemetry SDK spans", "jsonl+otel", "jsonl_otel"),
        ("OpenTelemetry SDK spans, no JSONL", "otel", "otel"),
    )
    rate = result.get("sample_rate")
    sampled = tuple(
        (f"{label}, sampled {rate:g}", f"{side} sampled", f"{key}_sampled")
        for label, side, key in every
        if rate is not None and f"{side} sampled_calls_per_s" in result
    )
    sides = every + sampled
    rows = [
        "| tracing | calls/s | overhead vs off (calls/s) | CPU us per call | overhead vs off (CPU) |",
        "|---|---:|---:|---:|---:|",
        f"| off | {result['off_calls_per_s']:,} | - | {result['off_cpu_us_per_call']} | - |",
    ]
    for label, side, key in (s for s in sides if f"{s[1]}_calls_per_s" in result):
        calls, cpu = result[f"overhead_{key}_per_round"], result[f"cpu_overhead_{key}_per_round"]
        rows.append(
            f"| {label} | {result[side + '_calls_per_s']:,} | {calls:+.1%} | "
            f"{result[side + '_cpu_us_per_call']} | {cpu:+.1%} |"
        )
    rows += [
        "",
        f"{result['events_per_call']} events per call; {result['cpu_us_per_event']} us of CPU per event "
        f"all in (emit, encode, write); {result['calls_per_round']:,} calls per side per round at "
        f"{result['concurrency']} in flight; CPU per call is this process's (caller, server and tracing "
        "in one Python process); calls/s and CPU are medians of rounds, overheads the median of each round's "
        "own ratio to `off` (steadier when the machine's speed drifts)"
        + (
            f"; sampled: both instances at `GEAR_TRACE_SAMPLE={rate:g}`, the SDK at "
            f"`parentbased_traceidratio` {rate:g}"
            if sampled
            else ""
        ),
    ]
    return "\n".join(rows)


def _contracts(out: str) -> str:
    """contract_overhead.py prints progress, then a JSON object: one row per concurrency."""
    result = json.loads(out[out.index("{") :])
    rows = [
        "| in flight | rpc.call calls/s | call_as calls/s | proxy calls/s | proxy slower by | "
        "CPU us/call rpc.call | CPU us/call proxy | proxy CPU over rpc.call |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key in sorted((k for k in result if k.startswith("c") and k[1:].isdigit()), key=lambda k: int(k[1:])):
        r = result[key]
        rows.append(
            f"| {key[1:]} | {r['call_calls_per_s']:,} | {r['call_as_calls_per_s']:,} | "
            f"{r['proxy_calls_per_s']:,} | {r['proxy_vs_call']:+.1%} | {r['call_cpu_us_per_call']} | "
            f"{r['proxy_cpu_us_per_call']} | {r['cpu_proxy_vs_call']:+.1%} |"
        )
    rows += [
        "",
        f"{result['calls_per_round']:,} calls per side per round, the sides taking turns in a new order each "
        "time (a turn is one call at 1 in flight); calls/s and CPU are medians of rounds, the two ratios "
        "to `rpc.call` medians over pairs of turns taken next to each other; CPU per call is this "
        "process's (caller and server in one process)",
    ]
    return "\n".join(rows)


def _soak_summary(out: str) -> str:
    """soak.py prints minute-by-minute tables, then one summary table: the docs show the summary."""
    return out[out.rindex("| broker |") :].strip()


def _plain(out: str) -> str:
    return out.strip()


def _text(out: str) -> str:
    return "```text\n" + out.strip() + "\n```"


@dataclass(frozen=True)
class Benchmark:
    """One script, its arguments for a quick and a full run, and how its output becomes a block."""

    name: str
    script: str
    quick: tuple[str, ...]
    full: tuple[str, ...]
    render: Callable[[str], str] = _plain
    needs: tuple[str, ...] = ()
    """Importable modules (and the programs ``java`` for PySpark, ``strace``) it needs; missing ones
    skip it."""


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        "rpc",
        "rpc.py",
        ("--rounds", "3", "--seconds", "1.5", "--loop", "both"),
        ("--rounds", "5", "--seconds", "3", "--loop", "both"),
        needs=("aio_pika", "uvloop"),
    ),
    Benchmark(
        "broker",
        "broker.py",
        ("--rounds", "3", "--messages", "20000", "--backlog", "50000"),
        ("--rounds", "5", "--messages", "60000", "--backlog", "100000"),
    ),
    Benchmark(
        "store",
        "store.py",
        ("--rounds", "3", "--messages", "5000", "--recover", "200000"),
        ("--rounds", "3"),
        render=_text,
        needs=("aio_pika",),
    ),
    Benchmark(
        "scale",
        "scale.py",
        ("--services", "1,10,100", "--seconds", "2", "--memory-count", "100"),
        ("--services", "1,10,100", "--seconds", "5", "--memory-count", "200"),
    ),
    Benchmark(
        "fleet",
        "fleet.py",
        ("--sizes", "100,1000", "--brokers", "reference", "--calls", "200"),
        ("--sizes", "100,1000,2000,5000"),
    ),
    Benchmark("routing", "routing.py", ("--routes", "100"), ("--routes", "300")),
    Benchmark(
        "link-cost",
        "link_cost.py",
        ("--links", "300", "--brokers", "reference"),
        ("--links", "1000"),
        needs=("aiormq",),
    ),
    Benchmark(
        "tracing",
        "tracing_overhead.py",
        ("--calls", "1000", "--rounds", "3"),
        ("--calls", "3000", "--rounds", "9", "--sample", "0.02"),
        render=_tracing,
    ),
    Benchmark(
        "metrics",
        "metrics_overhead.py",
        ("--calls", "2000", "--rounds", "3"),
        ("--calls", "6000", "--rounds", "5"),
        render=_metrics,
        needs=("prometheus_client",),
    ),
    Benchmark(
        "tracing-cpu",
        "tracing_cpu.py",
        ("--calls", "20000", "off", "jsonl", "otel-api", "otel", "jsonl-sampled", "otel-sampled"),
        ("--calls", "60000", "off", "jsonl", "otel-api", "otel", "jsonl-sampled", "otel-sampled"),
        render=_text,
    ),
    Benchmark(
        "one-call",
        "one_call.py",
        ("--rounds", "3", "--seconds", "1.5", "--compiled", "--idle-poll"),
        ("--rounds", "5", "--seconds", "2", "--compiled", "--idle-poll"),
    ),
    Benchmark("critical-path", "critical_path.py", ("--seconds", "4"), ("--seconds", "8")),
    Benchmark("syscalls", "syscalls.py", ("--calls", "1000"), ("--calls", "3000"), needs=("strace",)),
    Benchmark("soak", "soak.py", ("--minutes", "1"), ("--minutes", "10"), render=_soak_summary),
    Benchmark("dispatch", "dispatch.py", ("--requests", "10000", "--rounds", "5"), (), render=_text),
    Benchmark("read-path", "read_path.py", ("--rounds", "5"), ("--rounds", "15"), render=_text),
    Benchmark(
        "contracts",
        "contract_overhead.py",
        ("--calls", "1000", "--rounds", "5"),
        ("--calls", "2000", "--rounds", "9"),
        render=_contracts,
    ),
    Benchmark(
        "pipeline",
        "pipeline.py",
        ("--events", "100000,200000,500000"),
        ("--events", "1000000,2000000,5000000"),
        needs=("pyspark", "java"),
    ),
)


_PROGRAMS = frozenset(("java", "strace"))


def _missing(needs: tuple[str, ...]) -> list[str]:
    missing = []
    for need in needs:
        found = shutil.which(need) if need in _PROGRAMS else importlib.util.find_spec(need)
        if not found:
            missing.append(need)
    return missing


async def _version(url: str) -> str:
    import aiormq

    conn = await aiormq.connect(url)
    try:
        props = conn.server_properties
        return f"{props.get('product', '?')!s} {props.get('version', '?')!s}"
    finally:
        await conn.close()


def _reference_version() -> str:
    code = "import gear.broker.protocol.handshake as h; print(h.server_properties()['version'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    return out.stdout.strip() or "?"


def machine(url: str) -> str:
    """One line: when, where, which brokers."""
    try:
        rabbit = asyncio.run(_version(url))
    except Exception as exc:  # report, do not fail: the RabbitMQ rows will show it too
        rabbit = f"RabbitMQ unreachable ({exc.__class__.__name__})"
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    uv = "uvloop installed" if importlib.util.find_spec("uvloop") else "no uvloop"
    return (
        f"{now}; {os.cpu_count()} cores, load average {load} at start; Python {platform.python_version()} "
        f"({uv}); {rabbit}; Gear reference broker {_reference_version()}"
    )


def run_one(bench: Benchmark, quick: bool) -> tuple[str, str]:
    """Run one benchmark; returns (command line, rendered block)."""
    args = bench.quick if quick else bench.full
    command = ["python", f"benchmarks/{bench.script}", *args]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(HERE / bench.script), *args],
        capture_output=True,
        text=True,
        cwd=HERE.parent,
        check=False,
    )
    took = time.monotonic() - started
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        return " ".join(command), f"FAILED (exit {done.returncode} after {took:.0f} s):\n\n    {tail}"
    print(f"{bench.name}: {took:.0f} s", file=sys.stderr, flush=True)
    return " ".join(command), bench.render(done.stdout)


def _keep_markers(body: str) -> Callable[[re.Match[str]], str]:
    def fill(match: re.Match[str]) -> str:
        return match.group(1) + body.rstrip() + "\n" + match.group(2)

    return fill


def replace_blocks(text: str, blocks: dict[str, str]) -> tuple[str, list[str]]:
    """Replace each ``<!-- bench:NAME -->`` ... ``<!-- /bench:NAME -->`` body; returns (text, missing)."""
    missing = []
    for name, body in blocks.items():
        pattern = re.compile(
            rf"(<!-- bench:{re.escape(name)} -->\n).*?(<!-- /bench:{re.escape(name)} -->)", re.S
        )
        if not pattern.search(text):
            missing.append(name)
            continue
        text = pattern.sub(_keep_markers(body), text)
    return text, missing


def write_blocks(blocks: dict[str, str], pages: list[Path] | None = None) -> list[str]:
    """Replace each block in whichever of ``pages`` (default :data:`PAGES`) holds its markers.

    Returns the names no page has markers for.
    """
    found: set[str] = set()
    for page in PAGES if pages is None else pages:
        text = page.read_text()
        new, missing = replace_blocks(text, blocks)
        found |= set(blocks) - set(missing)
        if new != text:
            page.write_text(new)
    return [name for name in blocks if name not in found]


def main(argv: list[str] | None = None) -> int:
    """Run, print, optionally rewrite the docs' blocks; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="short runs (a few minutes in all)")
    parser.add_argument(
        "--only", default="", help="comma-separated subset: " + ",".join(b.name for b in BENCHMARKS)
    )
    parser.add_argument("--skip", default="", help="comma-separated benchmarks to leave out")
    parser.add_argument(
        "--write-docs",
        "--write-readme",
        dest="write_docs",
        action="store_true",
        help="replace the generated blocks in docs/ (docs/benchmarks.md)",
    )
    parser.add_argument("--url", default=RABBITMQ, help="RabbitMQ (the benchmarks' default URL)")
    args = parser.parse_args(argv)
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    skip = {x.strip() for x in args.skip.split(",") if x.strip()}
    command = "python benchmarks/all.py" + (" --quick" if args.quick else "")
    command += f" --skip {args.skip}" if args.skip else ""
    blocks = {"machine": f"Measured {machine(args.url)}; `{command}`."}
    print(blocks["machine"] + "\n")
    failed = False
    for bench in BENCHMARKS:
        if (only and bench.name not in only) or bench.name in skip:
            continue
        missing = _missing(bench.needs)
        if missing:
            print(f"## {bench.name}: skipped (needs {', '.join(missing)})\n", flush=True)
            continue
        command, block = run_one(bench, args.quick)
        if block.startswith("FAILED"):  # a shared broker hiccups now and then: one more try
            print(f"{bench.name}: {block.splitlines()[0]}; retrying once", file=sys.stderr, flush=True)
            command, block = run_one(bench, args.quick)
        failed |= block.startswith("FAILED")
        when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        blocks[bench.name] = f"`{command}` ({when}):\n\n{block}"
        print(f"## {bench.name}\n\n{blocks[bench.name]}\n", flush=True)
    if args.write_docs:
        missing = write_blocks(blocks)
        if missing:
            print(f"no page in docs/ has a block for: {', '.join(missing)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

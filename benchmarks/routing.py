"""What one topic route costs the reference broker with N instances bound, right after a binding changed
(an instance started or stopped, a caller made a reply queue: in a fleet, all the time).

A topic exchange gets, per instance, the bindings Gear makes (``TYPE.HOST`` and ``@all.TYPE`` to the
instance's queue) and the shared ``TYPE``; then ``--routes`` times over, one binding is added and a random
instance's key is routed. ``--baseline DIR`` measures another checkout's broker (e.g. ``git worktree add
/tmp/main main``) in the same run, each in a child process of its own.

Usage::

    python benchmarks/routing.py --sizes 100,1000,2000,5000 --baseline /tmp/main [--write-docs]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from all import write_blocks

__all__ = ("main",)

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import json, random, sys, time
from gear.broker.model.exchange import Exchange
sizes, routes = json.loads(sys.argv[1]), int(sys.argv[2])
out = {}
for n in sizes:
    ex = Exchange("gear", "topic")
    for i in range(n):
        ex.bind(f"T.h{i}", f"T.h{i}", {})
        ex.bind(f"T.h{i}", "@all.T", {})
    ex.bind("T", "T", {})
    keys = [f"T.h{random.randrange(n)}" for _ in range(routes)]
    began = time.perf_counter()
    for k, key in enumerate(keys):
        ex.bind(f"reply{k}", f"reply{k}", {})
        assert ex.route(key, lambda: None) == (key,)
    out[n] = (time.perf_counter() - began) / routes
print(json.dumps(out))
"""


def measure(source: Path, sizes: list[int], routes: int) -> dict[int, float]:
    """Seconds per bind-then-route for each size, with the broker of the checkout at ``source``."""
    env = {**os.environ, "PYTHONPATH": str(source)}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(sizes), str(routes)],
        capture_output=True,
        text=True,
        env=env,
        cwd=source,
        check=True,
    )
    return {int(k): v for k, v in json.loads(done.stdout).items()}


def _time(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} us"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,2000,5000", help="instances bound, comma-separated")
    parser.add_argument("--routes", type=int, default=300, help="bind-then-route rounds per size")
    parser.add_argument("--baseline", type=Path, help="another checkout's root, measured beside this one")
    parser.add_argument("--write-docs", action="store_true", help="write the table into docs/benchmarks.md")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    columns = {"this checkout": measure(ROOT, sizes, args.routes)}
    if args.baseline:
        columns = {"baseline": measure(args.baseline, sizes, args.routes), **columns}
    lines = [
        "| instances bound | " + " | ".join(columns) + " |",
        "|---:|" + "---:|" * len(columns),
    ]
    lines += [f"| {n:,} | " + " | ".join(_time(c[n]) for c in columns.values()) + " |" for n in sizes]
    command = "python benchmarks/routing.py" + "".join(f" {a}" for a in (argv or sys.argv[1:]))
    command = command.replace(" --write-docs", "")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    block = f"`{command}` ({when}):\n\n" + "\n".join(lines)
    print(block)
    if args.write_docs and write_blocks({"routing": block}):
        raise SystemExit("docs/benchmarks.md has no <!-- bench:routing --> block")


if __name__ == "__main__":
    main()

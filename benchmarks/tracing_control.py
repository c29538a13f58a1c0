"""Benchmark control: can ``tracing_overhead.py``'s method tell a few percent apart on this machine?

    python benchmarks/tracing_control.py [--url amqp://guest:guest@127.0.0.1:5672/] [--rounds 8]

Runs ``tracing_overhead.py``'s way (fresh services each round, short turns in a new order) with only
untraced and JSONL sides: three identical untraced pairs, JSONL sampled at 0.02 and 0.05, and JSONL at a
rate that drops every trace (1e-9: tracing on, no event written). Prints, per side, its median CPU per
call and the median of each round's deviation from the mean of the three untraced pairs: how far apart
identical sides land is the method's resolution.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
from pathlib import Path

from tracing_overhead import _Pair, _quiesce

from gear.tracing.spans import NO_SPANS

__all__ = ("main",)

_SIDES: dict[str, tuple[bool, float]] = {
    "off": (False, 1.0),
    "off#2": (False, 1.0),
    "off#3": (False, 1.0),
    "jsonl, drops all": (True, 1e-9),
    "jsonl sampled 0.02": (True, 0.02),
    "jsonl sampled 0.05": (True, 0.05),
}
"""Side -> (writes JSONL, sample rate)."""


async def _main(url: str, rounds: int, slices: int, calls: int) -> None:
    cpu: dict[str, list[float]] = {side: [] for side in _SIDES}
    with tempfile.TemporaryDirectory(prefix="gear-trace-control-") as directory:
        for n in range(rounds):
            pairs = {
                side: _Pair(url, Path(directory) / f"{i}-{n}" if jsonl else None, NO_SPANS, rate)
                for i, (side, (jsonl, rate)) in enumerate(_SIDES.items())
            }
            spent = dict.fromkeys(_SIDES, 0.0)
            try:
                for pair in pairs.values():
                    await pair.start()
                    await pair.run(200, 32)
                for j in range(slices):
                    order = list(_SIDES)
                    random.Random(n * 1000 + j).shuffle(order)
                    for side in order:
                        _quiesce()
                        spent[side] += (await pairs[side].run(calls, 32))[1]
            finally:
                for pair in pairs.values():
                    await pair.close()
            for side, used in spent.items():
                cpu[side].append(used / (calls * slices) * 1e6)
    baseline = [statistics.mean(row) for row in zip(cpu["off"], cpu["off#2"], cpu["off#3"], strict=True)]
    for side, values in cpu.items():
        deviations = [value / base - 1 for value, base in zip(values, baseline, strict=True)]
        print(
            f"{side:20s} {statistics.median(values):6.1f} us CPU/call, vs the untraced mean: median "
            f"{statistics.median(deviations):+.1%}, rounds " + " ".join(f"{d:+.0%}" for d in deviations)
        )


def main() -> None:
    """Run the control and print one line per side."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--slices", type=int, default=10)
    parser.add_argument("--calls", type=int, default=300, help="calls per turn")
    args = parser.parse_args()
    asyncio.run(_main(args.url, args.rounds, args.slices, args.calls))


if __name__ == "__main__":
    main()

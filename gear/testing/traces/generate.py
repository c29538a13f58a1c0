"""Synthetic trace files from a known call tree, and the truth the pipeline must reproduce.

The simulated system is the example system: WEB instances call ``CTRL`` (stateless), whose handler calls one
``REPO.host`` (point-to-point); WEB casts to ``AUDIT``, gathers from ``CTRL.*`` (multicast) and pings
``*.*`` (broadcast). Each call gets a scenario (ok, remote error, timeout with or without a late reply,
expired at the callee, unroutable after republishes, return or nack then republished, fatal nack,
duplicate delivery, redelivery after a requeue, no outcome). Callee clocks are skewed by seconds, so any
latency computed across instances would be visibly wrong. Blocked periods, reconnects, corrupt lines,
an invalid line and orphan events are added at the end. Used by the tests and by
``benchmarks/pipeline.py`` (``python -m gear.testing.traces.generate DIR --events 1000000``).
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gear.testing.traces.instance import MS, Instance
from gear.testing.traces.sim import Sim
from gear.testing.traces.truth import Call, Truth
from gear.tracing.api import Attr, EventName

__all__ = ("SCENARIOS", "Call", "Truth", "generate", "main")

SCENARIOS: dict[str, int] = {
    "ok": 62,
    "remote_error": 6,
    "timeout": 4,
    "late": 3,
    "expired": 2,
    "unroutable": 3,
    "return_ok": 4,
    "nack_ok": 3,
    "nacked": 1,
    "duplicate": 5,
    "redelivery": 4,
    "no_outcome": 3,
}
"""Scenario -> relative weight for point-to-point and stateless calls."""

_NESTING = frozenset({"ok", "remote_error", "return_ok", "nack_ok", "duplicate", "redelivery"})


@dataclass
class _Plan:
    roots: int
    seed: int
    corrupt: int
    scenario_weights: dict[str, int] = field(default_factory=lambda: dict(SCENARIOS))


def _roots_for(events: int) -> int:
    # About 13 events per root on average with the default mix (measured on the generator itself).
    return max(1, events // 13)


def generate(
    directory: str | Path,
    *,
    roots: int = 200,
    seed: int = 7,
    corrupt: int = 2,
    events: int | None = None,
    sample_rate: float | None = None,
) -> Truth:
    """Write trace files for ``roots`` top-level requests into ``directory``; return the truth.

    ``events`` (approximate total) overrides ``roots``. ``corrupt`` broken lines are appended. With
    ``sample_rate`` every instance writes it in its resource and records only the traces it selects
    (plus the events without a trace); the truth is still that of the whole traffic, except ``lines``.
    """
    plan = _Plan(roots=_roots_for(events) if events else roots, seed=seed, corrupt=corrupt)
    sim = Sim(Path(directory), random.Random(plan.seed), sample_rate)
    names = list(plan.scenario_weights)
    weights = list(plan.scenario_weights.values())
    rng = sim.rng
    for i in range(plan.roots):
        t0 = sim.base + i * 40_000_000
        web = rng.choice(sim.by_type["WEB"])
        trace = sim.new_trace()
        pick = rng.random()
        if pick < 0.08:
            sim.cast(web, "AUDIT", t0, trace, None, unroutable=rng.random() < 0.2)
            continue
        if pick < 0.11:
            sim.gather(web, "CTRL", t0, trace)
            continue
        if pick < 0.13:
            sim.gather(web, "*", t0, trace)
            continue
        scenario = rng.choices(names, weights)[0]
        ctrl = rng.choice(sim.by_type["CTRL"])
        call = sim.call(web, ctrl, "CTRL", "type", "CTRL/handle", t0, trace, None, scenario)
        if scenario in _NESTING and call.handler_start is not None and rng.random() < 0.7:
            repo = rng.choice(sim.by_type["REPO"])
            nested = rng.choices(names, weights)[0]
            sim.call(
                ctrl, repo, "REPO", "type_host", "REPO/get", call.handler_start, trace, call.span_id, nested
            )
    _infrastructure(sim)
    _bad_lines(sim, plan.corrupt)
    sim.close()
    return sim.truth


def _infrastructure(sim: Sim) -> None:
    """Blocked periods and reconnects with known durations."""
    t = sim.base + 5_000_000_000
    ctrl1, repo2, web2 = sim.instance("CTRL.ctrl1"), sim.instance("REPO.repo2"), sim.instance("WEB.web2")
    _blocked(sim, ctrl1, t, t + 2_500_000_000, "unblocked")
    _blocked(sim, ctrl1, t + 9_000_000_000, t + 9_750_000_000, "unblocked")
    _blocked(sim, repo2, t + 1_000_000_000, t + 4_000_000_000, "connection_lost")
    _reconnect(sim, repo2, t + 4_000_000_000, 1_500)
    _reconnect(sim, web2, t + 20_000_000_000, 1_200)


def _blocked(sim: Sim, inst: Instance, start: int, end: int, ended_by: str) -> None:
    """A blocked period ended by ``unblocked`` or ``connection_lost``."""
    inst.emit(
        start,
        EventName.BLOCKED,
        None,
        None,
        None,
        {Attr.BLOCKED_REASON: "low on memory", Attr.CONNECTION_ID: f"{inst.id}/1"},
    )
    end_name = EventName.UNBLOCKED if ended_by == "unblocked" else EventName.CONNECTION_LOST
    inst.emit(end, end_name, None, None, None, {Attr.CONNECTION_ID: f"{inst.id}/1"})
    sim.truth.blocked.append((inst.id, ended_by, (end - start) / MS))


def _reconnect(sim: Sim, inst: Instance, lost_at: int, downtime_ms: int) -> None:
    """A reconnect after ``downtime_ms`` (emits the loss unless a blocked period already did)."""
    if not any(b[0] == inst.id and b[1] == "connection_lost" for b in sim.truth.blocked):
        inst.emit(lost_at, EventName.CONNECTION_LOST, None, None, None, {Attr.ERROR_TYPE: "ConnectionReset"})
    inst.emit(
        lost_at + downtime_ms * MS,
        EventName.RECONNECT,
        None,
        None,
        None,
        {Attr.RECONNECT_ATTEMPT: 2, Attr.DOWNTIME_MS: float(downtime_ms)},
    )
    sim.truth.reconnects.append((inst.id, float(downtime_ms)))


def _orphans(sim: Sim) -> None:
    """A response nobody asked for and a delivery of a request nobody published."""
    web1, repo1 = sim.instance("WEB.web1"), sim.instance("REPO.repo1")
    web1.emit(sim.base, EventName.REPLY_RECEIVED, "f" * 16, None, None, {Attr.RPC_KIND: "call"})
    repo1.emit(sim.base, EventName.DELIVER, "e" * 16, None, None, {Attr.RPC_KIND: "call"})
    sim.truth.deliveries[(repo1.id, "e" * 16)] += 1
    sim.truth.orphan_events += 2


def _bad_lines(sim: Sim, corrupt: int) -> None:
    web1 = sim.instance("WEB.web1")
    samples = ['{"time_unix_nano": 1, "event.name": ', '{"time_unix_nano": "soon", "event.name": "x"}']
    for i in range(corrupt):
        web1.raw(samples[i % len(samples)])
    sim.truth.corrupt += corrupt
    record: dict[str, Any] = {"time_unix_nano": sim.base, "resource": web1.resource}
    web1.raw(json.dumps(record))
    sim.truth.invalid_events += 1
    _orphans(sim)


def main(argv: list[str] | None = None) -> None:
    """``python -m gear.testing.traces.generate DIR [--events N | --roots N] [--seed S] [--sample-rate R]``"""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("directory")
    parser.add_argument("--events", type=int, default=None)
    parser.add_argument("--roots", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--sample-rate", type=float, default=None)
    args = parser.parse_args(argv)
    truth = generate(
        args.directory, roots=args.roots, seed=args.seed, events=args.events, sample_rate=args.sample_rate
    )
    print(json.dumps({"lines": truth.lines, "calls": len(truth.calls)}))


if __name__ == "__main__":
    main()

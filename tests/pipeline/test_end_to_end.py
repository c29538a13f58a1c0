"""End to end: the example system runs with tracing on against the reference broker, the pipeline runs
on its trace files, and the dependency links are exactly the calls the test made."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import gear
from gear.tracing import Tracer, tracer_from_env

pytestmark = pytest.mark.timeout(300)

REPO_HOSTS = ("repo1", "repo2")


async def _run_system(url: str, trace_dir: Path, puts: int, lookups: int, refreshes: int) -> None:
    from gear.examples import ctrl, repo, web

    settings = gear.Settings(url=(url,), timeout=5.0, connect_wait=5.0)
    tracers: list[Tracer] = []

    def traced(type_: str, host: str) -> Tracer:
        tracer = tracer_from_env(type_, host, f"{type_}.{host}", directory=trace_dir)
        tracers.append(tracer)
        return tracer

    repos = [
        repo.create_service(h, [url], type_="REPO", settings=settings, tracer=traced("REPO", h))
        for h in REPO_HOSTS
    ]
    ctrl_svc = ctrl.create_service(
        "ctrl1", [url], repo_hosts=REPO_HOSTS, type_="CTRL", repo_type="REPO", settings=settings,
        tracer=traced("CTRL", "ctrl1"),
    )  # fmt: skip
    front = web.create_web(
        "web1", [url], repo_hosts=REPO_HOSTS, type_="WEB", repo_type="REPO", ctrl_type="CTRL",
        settings=settings, tracer=traced("WEB", "web1"),
    )  # fmt: skip
    services = [*repos, ctrl_svc, front.service]
    try:
        for svc in services:
            await svc.start()
        for i in range(puts):
            await front.put(f"key{i}", f"value{i}")
        for i in range(lookups):
            await front.lookup(f"key{i}")
        for _ in range(refreshes):
            await front.refresh("e2e")
    finally:
        for svc in reversed(services):
            await svc.stop()
        for tracer in tracers:
            tracer.close()


async def test_example_system_links_match_the_calls(spark: Any, tmp_path: Path) -> None:
    from gear.broker import Broker
    from gear.pipeline.job import analyze

    async with Broker(port=0) as broker:
        await _run_system(broker.url, tmp_path / "traces", puts=6, lookups=4, refreshes=1)
    assert len(list((tmp_path / "traces").glob("*.jsonl"))) == 4
    summary = analyze(spark, tmp_path / "traces", tmp_path / "out")
    rows = summary["tables"]["dependency_links"]["sample"]
    links = {(r["caller"], r["callee"]): (r["calls"], r["errors"]) for r in rows}
    assert links == {
        ("WEB", "REPO"): (6, 0),  # puts
        ("WEB", "CTRL"): (4, 0),  # lookups
        ("CTRL", "REPO"): (4, 0),  # each lookup asks the owning REPO
        ("WEB", "*"): (1, 0),  # the broadcast refresh: one call, whatever it reached
    }
    (broadcast,) = (r for r in rows if r["callee"] == "*")
    assert broadcast["receivers"] == "CTRL, REPO, WEB"  # the sender's own TYPE too
    quality = summary["data_quality"]
    assert quality["corrupt_lines"] == 0
    assert quality["invalid_events"] == 0
    assert quality["calls_without_outcome"] == 0
    latency = {(r["callee"], r["method"]): r["answered"] for r in summary["tables"]["latency"]["sample"]}
    assert latency[("REPO", "put")] == 6
    assert latency[("CTRL", "lookup")] == 4

"""Tracing from every entry point: ``--trace DIR`` / ``GEAR_TRACE`` on the CLI's own calls, ``gear serve``,
``gear demo``; ``gear demo --report DIR`` from nothing to a report; the progress bar of the analysis."""

from __future__ import annotations

import io
import json
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from gear.cli.main import app
from gear.cli.progress import stage_progress
from tests.cli.conftest import Invoke, Running
from tests.cli.test_commands import _start, _stop, _wait_until_answering


def _events(directory: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.jsonl")):
        rows.extend(json.loads(line) for line in path.read_text().splitlines())
    return rows


def test_cli_calls_are_traced_with_the_option_or_the_environment(
    gear_cli: Invoke, running: Running, tmp_path: Path
) -> None:
    address = f"{running.names.repo}.repo1"
    assert gear_cli("call", address, "status", "--trace", str(tmp_path / "opt")).exit_code == 0
    env = {
        "GEAR_URL": running.url,
        "GEAR_EXCHANGE": running.names.exchange,
        "GEAR_TRACE": str(tmp_path / "env"),
    }
    sent = CliRunner().invoke(app, ["send", "broadcast", "refresh", "-d", '{"reason": "t"}'], env=env)
    assert sent.exit_code == 0, sent.output
    for directory, kind in ((tmp_path / "opt", "call"), (tmp_path / "env", "cast")):
        events = _events(directory)
        assert {e["resource"]["service.name"] for e in events} == {"CLI"}
        names = Counter(e["event.name"] for e in events)
        assert names["gear.publish"] == 1, names
        assert names["gear.publish.confirm"] == 1, names
        assert events[0]["attributes"]["gear.rpc.kind"] == kind
    # the reply may be handled before the confirm's event: count, do not order
    assert [e["event.name"] for e in _events(tmp_path / "opt")].count("gear.rpc.response") == 1
    # without the option nothing is written
    assert gear_cli("call", address, "status").exit_code == 0
    assert len(list(tmp_path.iterdir())) == 2


def test_serve_writes_the_services_traces(gear_cli: Invoke, running: Running, tmp_path: Path) -> None:
    host, type_ = "traced1", f"{running.names.repo}T"
    running.invented_types.append(type_)
    env = {"GEAR_EXCHANGE": running.names.exchange}
    args = [
        "serve",
        "gear.examples.repo:create_service",
        "--url",
        running.url,
        "--type",
        type_,
        "--host",
        host,
    ]
    proc = _start([*args, "--trace", str(tmp_path)], env)
    try:
        _wait_until_answering(gear_cli, f"{type_}.{host}")
        assert gear_cli("call", f"{type_}.{host}", "put", "-d", '{"key": "k", "value": "v"}').exit_code == 0
    finally:
        code, _out, err = _stop(proc, signal.SIGTERM)
    assert code == 0, err
    events = [e for e in _events(tmp_path) if e["attributes"].get("rpc.method") == "put"]
    names = [e["event.name"] for e in events]
    assert names.count("gear.deliver") == 1
    assert names.count("gear.rpc.reply") == 1
    assert names.count("gear.settle") == 1
    assert {e["resource"]["host.name"] for e in events} == {host}


def test_demo_traces_every_instance_beside_its_delivery_counts(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["demo", "--trace", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["ok"] is True  # the demo's own delivery counter still sees every delivery
    assert doc["traces"] == str(tmp_path)
    events = _events(tmp_path)
    instances = {e["resource"]["service.instance.id"].rsplit(".", 1)[0] for e in events}
    assert instances == {"REPO.repo1", "REPO.repo2", "REPO.repo3", "CTRL.ctrl1", "CTRL.ctrl2", "WEB.web1"}
    nested = [
        e for e in events
        if e["event.name"] == "gear.publish" and e["resource"]["service.name"] == "CTRL"
        and e["attributes"].get("gear.rpc.kind") == "call"
    ]  # fmt: skip
    assert nested, "CTRL's nested calls to REPO are traced"
    assert all(e.get("parent_span_id") for e in nested)


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.timeout(300)
def test_demo_report_goes_from_nothing_to_a_report(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    result = CliRunner().invoke(app, ["demo", "--report", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    last = result.stdout.rstrip().splitlines()[-1]
    assert last.startswith(f"report: {tmp_path / 'r' / 'report.html'}"), last
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    links = {(r["caller"], r["callee"]) for r in summary["tables"]["dependency_links"]["sample"]}
    assert ("CTRL", "REPO") in links  # the nested call
    assert ("WEB", "CTRL") in links
    assert summary["data_quality"]["corrupt_lines"] == 0
    assert "<svg id='timeline-chart'" in (tmp_path / "r" / "report.html").read_text()


def test_progress_names_each_stage_on_a_terminal_and_is_silent_otherwise() -> None:
    stages = ("starting", "reading", "writing", "done")
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=100)
    with stage_progress(stages, console=terminal) as say:
        for stage in stages:
            say(stage)
    shown = screen.getvalue()
    assert "done" in shown
    assert "4/3" not in shown
    assert "3/3" in shown
    for quiet, console in ((True, Console(file=io.StringIO(), force_terminal=True)),
                           (False, Console(file=io.StringIO(), force_terminal=False))):  # fmt: skip
        with stage_progress(stages, quiet=quiet, console=console) as say:
            say("reading")
        assert console.file.getvalue() == ""  # type: ignore[attr-defined]


def test_analyze_prints_no_progress_when_not_a_terminal(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from gear import pipeline

    def fake(path: Any, out: Any, progress: Any = None, **_: Any) -> dict[str, Any]:
        for stage in pipeline.STAGES:
            progress(stage)
        return {"tables": {}, "report": str(tmp_path / "report.html")}

    monkeypatch.setattr(pipeline, "run_analyze", fake)
    (tmp_path / "t.jsonl").write_text("")
    result = CliRunner().invoke(app, ["traces", "analyze", str(tmp_path), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "writing" not in result.stderr

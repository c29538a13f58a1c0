"""``gear --help``, ``topology``, ``broker``, ``serve`` and ``traces``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gear.cli.main import app
from gear.cli.output import ExitCode
from tests.cli.conftest import Invoke, Running, json_out

GEAR = [sys.executable, "-c", "from gear.cli.main import app; app()"]
"""The CLI in a child process (the installed ``gear`` script may belong to another interpreter)."""


def run_cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """In-process ``gear serve`` exports GEAR_URL/TYPE/HOST/TRACE; put the environment back afterwards."""
    for name in ("GEAR_URL", "GEAR_TYPE", "GEAR_HOST", "GEAR_CONNECT_WAIT", "GEAR_TRACE"):
        monkeypatch.setenv(name, "")  # recorded as unset, so whatever the command sets is removed after
        monkeypatch.delenv(name)
    return monkeypatch


# -- help and exit codes -------------------------------------------------------------------------


def test_help_documents_every_exit_code() -> None:
    result = run_cli("--help")
    assert result.exit_code == 0
    for code in ExitCode:
        assert re.search(rf"^\s*{int(code)}\s+\S", result.stdout, re.M), (
            f"exit code {int(code)} not in --help"
        )
    assert "GEAR_URL" in result.stdout


@pytest.mark.parametrize(
    "command",
    [
        ["send"],
        ["send", "p2p"],
        ["send", "stateless"],
        ["send", "multicast"],
        ["send", "broadcast"],
        ["call"],
        ["cast"],
        ["gather"],
        ["nodes"],
        ["serve"],
        ["broker"],
        ["topology"],
        ["demo"],
        ["traces", "analyze"],
        ["contract"],
        ["contract", "export"],
        ["contract", "diff"],
    ],
    ids=" ".join,
)
def test_every_command_has_help(command: list[str]) -> None:
    result = run_cli(*command, "--help")
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.stdout


def test_broker_help_says_messages_live_in_memory() -> None:
    text = " ".join(run_cli("broker", "--help").stdout.split())
    assert "in memory" in text
    assert "--memory-high-watermark" in text


def test_version_names_the_distribution_and_its_installed_version() -> None:
    from importlib.metadata import version

    result = run_cli("--version")
    assert result.exit_code == ExitCode.OK
    assert result.stdout == f"gear-rpc {version('gear-rpc')}\n"


def test_unknown_command_is_a_usage_error() -> None:
    assert run_cli("frobnicate").exit_code == ExitCode.USAGE


# -- topology ----------------------------------------------------------------------------------


def test_topology_lists_exchange_queues_and_bindings() -> None:
    result = run_cli("topology", "REPO", "host2")
    assert result.exit_code == 0, result.output
    assert "exchange  gear (topic" in result.stdout
    for key, meaning in [
        ("REPO", "stateless"),
        ("REPO.host2", "point-to-point"),
        ("REPO.@all", "multicast: REPO.*"),
        ("@all.@all", "broadcast: *.*"),
    ]:
        assert re.search(rf"^{re.escape(key)}\s+REPO\S*\s+{re.escape(meaning)}", result.stdout, re.M), key


def test_topology_json_matches_the_sdk() -> None:
    from gear import Topology

    result = run_cli("topology", "CTRL", "h1", "--json", "--exchange", "ops", "--quorum")
    assert result.exit_code == 0
    assert json_out(result) == Topology.for_service("CTRL", "h1", exchange="ops", quorum=True).as_dict()


def test_topology_of_a_client_has_no_shared_queue() -> None:
    doc = json_out(run_cli("topology", "CLI", "h1", "--client", "--json"))
    assert [q["name"] for q in doc["queues"]] == ["CLI.h1"]
    assert [b["routing_key"] for b in doc["bindings"]] == ["CLI.h1"]


def test_topology_rejects_a_bad_host() -> None:
    result = run_cli("topology", "REPO", "a.b")
    assert result.exit_code == ExitCode.USAGE
    assert "invalid HOST" in result.stderr


# -- broker (a child process: it runs until a signal) ------------------------------------------


def _start(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*GEAR, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        preexec_fn=_default_sigint,
    )


def _default_sigint() -> None:
    """Give the child Ctrl-C's default action: a suite started in the background by a shell script
    (`.ci/run &`) inherits SIGINT ignored, and the child would never see the Ctrl-C these tests send."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stop(proc: subprocess.Popen[str], sig: signal.Signals) -> tuple[int, str, str]:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=20)
    return proc.returncode, out, err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_broker_serves_until_a_signal(sig: signal.Signals) -> None:
    proc = _start(["broker", "--port", "0", "--memory-high-watermark", "50000000"])
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"listening on amqp://guest:\*\*\*@(\S+)", line)
        assert match, f"the URL is shown with its password masked: {line}"
        assert "in memory" in line
        # It is a real AMQP server: the CLI can talk through it (nobody serves, so the cast is returned).
        url = f"amqp://guest:guest@{match.group(1)}"
        result = CliRunner().invoke(app, ["cast", "NOBODY.h1", "x", "--url", url, "-t", "0.3"])
        assert result.exit_code == ExitCode.UNROUTABLE, result.output
    finally:
        code, out, err = _stop(proc, sig)
    assert code == 0, err
    assert "stopped" in out


def test_broker_port_in_use_is_one_line() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*GEAR, "broker", "--port", str(port)], capture_output=True, text=True, timeout=20
        )
    assert done.returncode == ExitCode.CONNECT, done.stderr
    assert done.stderr.startswith("gear: cannot listen on")
    assert "Traceback" not in done.stderr


# -- serve ---------------------------------------------------------------------------------------


def _wait_until_answering(gear_cli: Invoke, address: str) -> None:
    for _ in range(100):
        if gear_cli("call", address, "status", "-t", "0.5").exit_code == 0:
            return
        time.sleep(0.1)
    pytest.fail(f"{address} never answered")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_runs_a_module_service_and_stops_gracefully(
    gear_cli: Invoke, running: Running, sig: signal.Signals
) -> None:
    host = f"served{sig.value}"
    type_ = f"{running.names.repo}X"
    running.invented_types.append(type_)
    env = {"GEAR_EXCHANGE": running.names.exchange}
    proc = _start(
        ["serve", "gear.examples.repo:create_service", "--url", running.url, "--type", type_, "--host", host],
        env,
    )
    try:
        _wait_until_answering(gear_cli, f"{type_}.{host}")
        result = gear_cli("call", f"{type_}.{host}", "put", "-d", '{"key": "k", "value": "v"}', "--json")
        assert json_out(result)["result"] == {"host": host, "key": "k", "version": 1}
    finally:
        code, _out, err = _stop(proc, sig)
    assert code == 0, err
    assert f"starting {type_}.{host}" in err
    assert f"{type_}.{host} stopped" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("gear.examples.repo", "expected module:attr"),
        ("examples.nope:create_service", "cannot import"),
        ("gear.examples.repo:nope", "has no attribute"),
        ("gear.examples.models:Item", "not a gear.Service"),
    ],
)
def test_serve_bad_target_is_a_usage_error(clean_env: pytest.MonkeyPatch, target: str, message: str) -> None:
    result = run_cli("serve", target, "--url", "amqp://guest:guest@127.0.0.1:1/")
    assert result.exit_code == ExitCode.USAGE, result.output
    assert message in result.stderr


def test_serve_without_a_broker_exits_with_connect_error(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("GEAR_CONNECT_WAIT", "0.3")
    result = run_cli("serve", "gear.examples.repo:create_service", "--url", "amqp://guest:guest@127.0.0.1:1/")
    assert result.exit_code == ExitCode.CONNECT, result.output
    assert "Traceback" not in result.output


# -- traces --------------------------------------------------------------------------------------


def test_traces_without_pyspark_prints_the_install_hint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from gear import pipeline

    def missing(*args: object, **kwargs: object) -> dict[str, Any]:
        raise pipeline.SparkMissingError()

    monkeypatch.setattr(pipeline, "run_analyze", missing)
    (tmp_path / "t.jsonl").write_text("")
    result = run_cli("traces", "analyze", str(tmp_path), "--out", str(tmp_path / "out"))
    assert result.exit_code == ExitCode.MISSING_DEPENDENCY
    assert result.stderr.count("\n") == 1
    assert "pip install 'gear-rpc[spark]'" in result.stderr


def test_traces_passes_options_through(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from gear import pipeline

    seen: dict[str, Any] = {}

    def fake(path: Any, out: Any, **kwargs: Any) -> dict[str, Any]:
        seen.update(path=path, out=out, **kwargs)
        return {"tables": {"dependency_links": {"rows": 3, "sample": []}}}

    monkeypatch.setattr(pipeline, "run_analyze", fake)
    (tmp_path / "t.jsonl").write_text("")
    result = run_cli(
        "traces",
        "analyze",
        str(tmp_path),
        "--out",
        str(tmp_path / "o"),
        "--master",
        "local[1]",
        "--since",
        "2026-11-22T05:00:00+00:00",
    )
    assert result.exit_code == 0, result.output
    assert seen["master"] == "local[1]"
    assert seen["since"].isoformat() == "2026-11-22T05:00:00+00:00"
    assert seen["until"] is None
    assert "dependency_links" in result.stdout
    bad = run_cli("traces", "analyze", str(tmp_path), "--out", str(tmp_path), "--until", "yesterday")
    assert bad.exit_code == ExitCode.USAGE


def test_traces_says_when_counts_are_estimates(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from gear import pipeline

    note = "sampled: 0.25; counts are estimates scaled from the sampled traces"
    summary = {"tables": {}, "sampling": {"rate": 0.25, "note": note}}
    monkeypatch.setattr(pipeline, "run_analyze", lambda *_args, **_kwargs: summary)
    (tmp_path / "t.jsonl").write_text("")
    human = run_cli("traces", "analyze", str(tmp_path), "--out", str(tmp_path / "o"))
    assert human.exit_code == 0, human.output
    assert note in human.stdout
    as_json = run_cli("traces", "analyze", str(tmp_path), "--out", str(tmp_path / "o"), "--json")
    assert json.loads(as_json.stdout)["sampling"]["rate"] == 0.25


@pytest.mark.spark  # without PySpark the command says how to install it first (the test above)
def test_traces_missing_input_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli("traces", "analyze", str(tmp_path / "nothing-here"), "--out", str(tmp_path / "o"))
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "no trace files" in result.stderr


def test_ctrl_c_while_waiting_exits_130(running: Running, slow: Any) -> None:
    env = {"GEAR_EXCHANGE": running.names.exchange}
    proc = _start(["-vv", "call", slow.address, "status", "--url", running.url, "-t", "20"], env)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # INFO logs: the CLI's own instance is up, the call is in flight
            if " started" in line:
                break
    finally:
        code, _out, err = _stop(proc, signal.SIGINT)
    assert code == ExitCode.INTERRUPTED, err
    assert err.rstrip().endswith("gear: interrupted")


def test_broker_takes_message_size_and_disk_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    import gear.broker
    from gear.broker import BrokerConfig

    seen: list[BrokerConfig] = []

    async def serve(config: BrokerConfig, on_ready: Any = None) -> None:
        seen.append(config)

    monkeypatch.setattr(gear.broker, "serve", serve)
    result = run_cli("broker", "--port", "0", "--max-message-size", "128MiB", "--disk-free-limit", "50MB")
    assert result.exit_code == 0, result.output
    assert (seen[0].max_message_size, seen[0].disk_free_limit) == (128 * 1024**2, 50_000_000)
    run_cli("broker", "--port", "0")
    assert (seen[1].max_message_size, seen[1].disk_free_limit) == (16 * 1024**2, None)


def test_broker_data_dir_is_created_and_its_recovery_shown(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import gear.broker
    from gear.broker import BrokerConfig, RecoveryReport

    seen: list[BrokerConfig] = []

    async def serve(config: BrokerConfig, on_ready: Any = None, on_recovered: Any = None) -> None:
        seen.append(config)
        assert config.data_dir is not None
        on_recovered(RecoveryReport(config.data_dir, queues=2, messages=5, stored=4))
        on_ready("amqp://guest:guest@127.0.0.1:5672/")

    monkeypatch.setattr(gear.broker, "serve", serve)
    target = tmp_path / "state" / "broker"
    result = run_cli("broker", "--port", "0", "--data-dir", str(target))
    assert result.exit_code == 0, result.output
    assert target.is_dir()
    assert seen[0].data_dir == str(target)
    text = " ".join(result.output.split())
    assert "recovered 0 exchange(s), 2 queue(s), 0 binding(s), 5 queued message(s) (4 stored)" in text
    assert f"durable state in {target}" in text


def test_broker_help_explains_the_data_dir() -> None:
    result = run_cli("broker", "--help")
    text = " ".join(result.output.split())
    assert "--data-dir" in text
    assert "recover it at start" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-message-size", "lots"], "expected a size"),
        (["--max-message-size", "1GiB"], "max_message_size must be in 1..536870912"),
        (["--disk-free-limit", "0"], "expected a size"),
    ],
)
def test_broker_rejects_bad_sizes(args: list[str], message: str) -> None:
    result = run_cli("broker", "--port", "0", *args)
    assert result.exit_code == ExitCode.USAGE, result.output
    assert message in " ".join(result.output.split())


def test_broker_help_states_rabbitmq_size_defaults() -> None:
    text = " ".join(run_cli("broker", "--help").stdout.split())
    assert "16MiB in 4.x and was 128MiB in 3.x" in text
    assert "--disk-free-limit" in text

"""``gear send p2p|stateless|multicast|broadcast``: the four routing forms spelled out."""

from __future__ import annotations

import time

from gear.cli.output import ExitCode
from tests.cli.conftest import Invoke, Running, json_out


def _refreshes(gear_cli: Invoke, running: Running) -> dict[str, int]:
    total = str(len(running.system.services))
    result = gear_cli("gather", "*.*", "status", "--json", "--expected", total, "-t", "2")
    return {
        r["sender"]: r["result"]["refreshes"]
        for r in json_out(result)["replies"]
        if r["ok"] and isinstance(r["result"], dict)
    }


def test_p2p_call_reaches_that_instance(gear_cli: Invoke, running: Running) -> None:
    result = gear_cli("send", "p2p", running.names.repo, "repo3", "status", "--call", "--json")
    assert result.exit_code == 0, result.output
    assert json_out(result)["result"]["host"] == "repo3"


def test_p2p_cast_by_default(gear_cli: Invoke, running: Running) -> None:
    data = '{"key": "sent-by-cast", "value": "x"}'
    result = gear_cli("send", "p2p", running.names.repo, "repo1", "put", "--data", data)
    assert result.exit_code == 0, result.output
    assert f"sent put to {running.repo('repo1')}" in result.stdout


def test_stateless_call_is_answered_by_one_ctrl(gear_cli: Invoke, running: Running) -> None:
    result = gear_cli("send", "stateless", running.names.ctrl, "status", "--call", "--json")
    assert result.exit_code == 0, result.output
    assert json_out(result)["result"]["host"] in {"ctrl1", "ctrl2"}


def test_multicast_call_gathers_every_ctrl(gear_cli: Invoke, running: Running) -> None:
    result = gear_cli("send", "multicast", running.names.ctrl, "status", "--call", "-t", "0.7", "--json")
    assert result.exit_code == 0, result.output
    senders = sorted(r["sender"] for r in json_out(result)["replies"])
    assert senders == [f"{running.names.ctrl}.ctrl1", f"{running.names.ctrl}.ctrl2"]


def test_broadcast_cast_reaches_every_instance_once(gear_cli: Invoke, running: Running) -> None:
    before = _refreshes(gear_cli, running)
    result = gear_cli("send", "broadcast", "refresh", "--data", '{"reason": "test"}')
    assert result.exit_code == 0, result.output
    assert "sent refresh to *.*" in result.stdout
    expected = {name: count + 1 for name, count in before.items()}
    for _ in range(50):
        after = _refreshes(gear_cli, running)
        if after == expected:
            break
        time.sleep(0.05)
    assert after == expected
    assert len(after) == len(running.system.services)


def test_send_rejects_a_bad_type(gear_cli: Invoke) -> None:
    result = gear_cli("send", "multicast", "no.dots", "status")
    assert result.exit_code == ExitCode.USAGE
    assert "invalid" in result.stderr

"""``gear call``, ``cast``, ``gather`` and ``nodes`` against a live broker and the example system."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gear.cli.output import ExitCode
from tests.cli.conftest import Invoke, Running, Slow, json_out


def _no_traceback(result: object) -> None:
    assert "Traceback" not in getattr(result, "output", "")


# -- call -----------------------------------------------------------------------------------------


def test_call_point_to_point_prints_the_reply(gear_cli: Invoke, running: Running) -> None:
    put = gear_cli("call", running.repo("repo2"), "put", "--data", '{"key": "cli-k", "value": "v"}')
    assert put.exit_code == 0, put.output
    assert f"{running.repo('repo2')} answered put" in put.stdout
    assert '"host": "repo2"' in put.stdout


def test_call_json_is_one_document(gear_cli: Invoke, running: Running) -> None:
    result = gear_cli("call", running.repo("repo1"), "status", "--data", '{"verbose": true}', "--json")
    assert result.exit_code == 0, result.output
    doc = json_out(result)
    assert doc["ok"] is True
    assert doc["result"]["host"] == "repo1"
    assert doc["result"]["type"] == running.names.repo


def test_call_stateless_goes_through_ctrl_to_repo(gear_cli: Invoke, running: Running) -> None:
    key = "cli-nested"
    owner = running.system.web.repo_for(key)
    assert gear_cli("call", owner, "put", "-d", f'{{"key": "{key}", "value": "deep"}}').exit_code == 0
    result = gear_cli("call", running.names.ctrl, "lookup", "-d", f'{{"key": "{key}"}}', "--json")
    assert result.exit_code == 0, result.output
    found = json_out(result)["result"]
    assert found["value"] == "deep"
    assert owner.endswith("." + found["repo_host"])
    assert found["ctrl_host"] in {svc.host for svc in running.system.ctrls}


def test_call_reads_the_payload_from_a_file_or_stdin(
    gear_cli: Invoke, running: Running, tmp_path: Path
) -> None:
    payload = tmp_path / "query.json"
    payload.write_text('{"verbose": true}')
    from_file = gear_cli("call", running.repo(), "status", "--data-file", str(payload), "--json")
    assert from_file.exit_code == 0, from_file.output
    from_stdin = gear_cli(
        "call", running.repo(), "status", "--data-file", "-", "--json", input='{"verbose": true}'
    )
    assert from_stdin.exit_code == 0, from_stdin.output
    assert json_out(from_stdin)["result"]["host"] == "repo1"


# -- cast and gather -----------------------------------------------------------------------------


def _ctrl_versions(gear_cli: Invoke, running: Running) -> dict[str, int]:
    result = gear_cli("gather", f"{running.names.ctrl}.*", "status", "--json", "--expected", "2")
    return {r["sender"]: r["result"]["config_version"] for r in json_out(result)["replies"]}


def test_cast_multicast_reaches_every_ctrl(gear_cli: Invoke, running: Running) -> None:
    result = gear_cli("cast", f"{running.names.ctrl}.*", "reload", "--data", '{"version": 41}')
    assert result.exit_code == 0, result.output
    assert "sent reload" in result.stdout
    for _ in range(50):  # the cast returned when the broker confirmed it, not when CTRL handled it
        versions = _ctrl_versions(gear_cli, running)
        if set(versions.values()) == {41}:
            break
        time.sleep(0.05)
    assert versions == {f"{running.names.ctrl}.ctrl1": 41, f"{running.names.ctrl}.ctrl2": 41}


def test_gather_broadcast_shows_every_instance(gear_cli: Invoke, running: Running, slow: Slow) -> None:
    result = gear_cli("gather", "*.*", "status", "--timeout", "1", "--json")
    doc = json_out(result)
    senders = {r["sender"] for r in doc["replies"]}
    expected = {f"{s.type}.{s.host}" for s in running.system.services}
    assert expected <= senders
    # The slow instance is alive (it answers the census) but its status comes too late.
    assert doc["missing"] == [slow.address]
    assert result.exit_code == ExitCode.TIMEOUT


def test_gather_table_for_a_person(gear_cli: Invoke, running: Running) -> None:
    result = gear_cli("gather", f"{running.names.repo}.*", "status", "-t", "0.7")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["instance", "status", "result"]
    for host in ("repo1", "repo2", "repo3"):
        assert any(line.startswith(running.repo(host)) and " ok " in line for line in lines)
    assert "3 replied, 0 with an error, 0 did not answer in time" in result.stdout


def test_gather_lists_who_did_not_answer_in_time(gear_cli: Invoke, slow: Slow) -> None:
    result = gear_cli("gather", f"{slow.type}.*", "status", "--timeout", "0.5")
    assert result.exit_code == ExitCode.TIMEOUT, result.output
    assert slow.address in result.stdout
    assert "no reply" in result.stdout
    assert result.stderr.count("\n") == 1
    _no_traceback(result)


def test_gather_expected_count_not_reached(gear_cli: Invoke, running: Running) -> None:
    result = gear_cli("gather", f"{running.names.ctrl}.*", "status", "--expected", "5", "-t", "0.5")
    assert result.exit_code == ExitCode.TIMEOUT
    assert "2 of 5" in result.stderr


def test_gather_error_replies(gear_cli: Invoke, running: Running) -> None:
    result = gear_cli("gather", f"{running.names.repo}.*", "no_such_method", "--json", "--expected", "3")
    assert result.exit_code == ExitCode.REMOTE
    doc = json_out(result)
    assert len(doc["replies"]) == 3
    assert all(r["error"]["type"] == "MethodNotFound" for r in doc["replies"])


def test_nodes_lists_the_live_instances(gear_cli: Invoke, running: Running) -> None:
    result = gear_cli("nodes", "--json", "-t", "0.7")
    assert result.exit_code == 0, result.output
    nodes = {n["instance"]: n["info"] for n in json_out(result)["nodes"]}
    found = set(nodes)
    assert {f"{s.type}.{s.host}" for s in running.system.services} <= found
    # The SDK's built-in gear.ping says who the instance is and what it serves.
    assert {"get", "put", "status"} <= set(nodes[running.repo()]["methods"])
    # ... and how its connection stands: state, and which broker (node) it is connected to
    assert nodes[running.repo()]["state"] == "ready"
    assert nodes[running.repo()]["broker"].startswith("amqp://")
    assert not any(name.startswith("CLI.") for name in found), "the CLI must not list itself"
    one_type = gear_cli("nodes", running.names.ctrl, "-t", "0.7")
    assert one_type.exit_code == 0
    assert "2 instance(s) alive" in one_type.stdout
    assert "lookup, refresh, reload, status" in one_type.stdout
    assert "ready" in one_type.stdout


# -- errors: one line on stderr, a distinct exit code ------------------------------------------


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["call", "<repo>", "delete"], ExitCode.METHOD_NOT_FOUND, "has no handler for 'delete'"),
        (["call", "<repo>", "put", "-d", '{"key": "k"}'], ExitCode.BAD_PAYLOAD, "value: Field required"),
        (["call", "<slow>", "boom"], ExitCode.REMOTE, "KeyError"),
        (["call", "<slow>", "status", "-t", "0.3"], ExitCode.TIMEOUT, "no reply within"),
        (["call", "<repo_type>.nohost", "get", "-t", "0.3"], ExitCode.UNROUTABLE, "no queue bound"),
        (["cast", "<repo_type>.nohost", "get", "-t", "0.3"], ExitCode.UNROUTABLE, "no queue bound"),
        (
            ["call", "<repo>", "status", "-u", "amqp://guest:guest@127.0.0.1:1/", "-t", "0.3"],
            ExitCode.CONNECT,
            "",
        ),
        (["call", "bad..address", "status"], ExitCode.USAGE, "invalid address"),
        (["call", "<ctrl_type>.*", "status"], ExitCode.USAGE, "use `gear gather`"),
        (["gather", "<repo>", "status"], ExitCode.USAGE, "use `gear call`"),
        (["call", "<repo>", "status", "-d", "{not json"], ExitCode.USAGE, "not valid JSON"),
        (["call", "<repo>", "status", "-u", "http://nope/"], ExitCode.USAGE, "amqp://"),
    ],
    ids=[
        "method-not-found",
        "bad-payload",
        "remote-error",
        "timeout",
        "unroutable-call",
        "unroutable-cast",
        "cannot-connect",
        "bad-address",
        "call-to-fanout",
        "gather-to-one",
        "bad-json",
        "bad-url",
    ],
)
def test_expected_failures_exit_with_their_code(
    gear_cli: Invoke, running: Running, slow: Slow, args: list[str], code: ExitCode, message: str
) -> None:
    names = {
        "<repo_type>": running.names.repo,
        "<ctrl_type>": running.names.ctrl,
        "<repo>": running.repo(),
        "<slow>": slow.address,
    }

    def fill(arg: str) -> str:
        for token, value in names.items():
            arg = arg.replace(token, value)
        return arg

    result = gear_cli(*(fill(arg) for arg in args))
    assert result.exit_code == code, result.output
    assert message in result.stderr
    _no_traceback(result)
    if code != ExitCode.USAGE:
        assert result.stderr.startswith("gear: ")
        assert result.stderr.count("\n") == 1, result.stderr


def test_failures_in_json_mode_print_an_error_document(gear_cli: Invoke, running: Running) -> None:
    result = gear_cli("call", running.repo(), "delete", "--json")
    assert result.exit_code == ExitCode.METHOD_NOT_FOUND
    doc = json_out(result)
    assert doc["ok"] is False
    assert doc["error"]["exit_code"] == ExitCode.METHOD_NOT_FOUND
    assert doc["error"]["remote_type"] == "MethodNotFound"

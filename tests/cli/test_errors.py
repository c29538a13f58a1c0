"""What a newcomer's mistakes print: one line on stderr, naming the broker where it matters, no pydantic,
pamqp or Python internals, and the exit code ``gear --help`` documents (issue 27)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result
from yarl import URL

from gear.cli.main import app
from gear.cli.output import ExitCode
from tests.cli.conftest import Invoke, Running, json_out

GEAR = [sys.executable, "-c", "from gear.cli.main import app; app()"]

INTERNALS = ("pydantic", "validation error", "Traceback", "pamqp", "aiormq", "object at 0x", "[type=")
"""Words that mean a library's or Python's own text reached the user."""


def run_cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def one_line(result: Result, code: ExitCode) -> str:
    """The single stderr line of a failed command (without ``gear: ``), after checking its shape."""
    assert result.exit_code == code, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gear: "), lines[0]
    for word in INTERNALS:
        assert word not in lines[0], lines[0]
    return lines[0].removeprefix("gear: ")


def with_path(url: str, *, path: str = "/", password: str | None = None) -> str:
    """``url`` with another vhost path or password."""
    changed = URL(url).with_path(path)
    return str(changed.with_password(password) if password is not None else changed)


# -- settings: the URL, the HOST, a bad value ----------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://localhost/", "broker URL 'http://localhost/' must start with amqp:// or amqps://"),
        ("amqp://[bad", "broker URL 'amqp://[bad' is malformed: "),
        (
            "amqp://guest:secret@localhost:99999/",
            "broker URL 'amqp://guest:***@localhost:99999/' is malformed",
        ),
        ("amqp:///", "broker URL 'amqp:///' has no host"),
    ],
    ids=["scheme", "ipv6", "port", "no-host"],
)
@pytest.mark.parametrize("command", ["call", "cast", "nodes"])
def test_a_bad_url_is_one_line_before_any_connect(command: str, url: str, expected: str) -> None:
    args = [command] if command == "nodes" else [command, "REPO.h1", "status"]
    line = one_line(run_cli(*args, "-u", url), ExitCode.USAGE)
    assert line.startswith(expected), line
    assert "secret" not in line


def test_a_bad_host_for_serve_is_one_line(clean_env: pytest.MonkeyPatch) -> None:
    result = run_cli("serve", "gear.examples.repo:create_service", "--host", "bad host", "-u", "amqp://h/")
    line = one_line(result, ExitCode.USAGE)
    assert line.startswith("invalid HOST 'bad host': use letters, digits"), line


def test_a_bad_setting_names_its_variable(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("GEAR_TIMEOUT", "-1")
    result = run_cli("serve", "gear.examples.repo:create_service", "--host", "r1", "-u", "amqp://h/")
    assert (
        one_line(result, ExitCode.USAGE) == "timeout (GEAR_TIMEOUT): Input should be greater than 0, got '-1'"
    )


def test_the_sdk_refuses_bad_settings_in_the_same_words() -> None:
    import gear

    with pytest.raises(gear.ConfigurationError) as caught:
        gear.Service("WEB", url="amqp://guest:secret@[bad/")
    assert str(caught.value).startswith("broker URL 'amqp://guest:***@[bad/' is malformed")
    with pytest.raises(gear.ConfigurationError) as caught:
        gear.Service("WEB", prefetch=0)
    assert str(caught.value) == "prefetch (GEAR_PREFETCH): Input should be greater than or equal to 1, got 0"


# -- the broker refuses: a vhost, a login; nobody listens ----------------------------------------


def test_a_missing_vhost_is_one_line_naming_the_broker(gear_cli: Invoke, running: Running) -> None:
    url = with_path(running.url, path="/nope")
    line = one_line(gear_cli("call", running.repo(), "status", "-u", url, "-t", "0.5"), ExitCode.CONNECT)
    masked = with_path(running.url, path="/nope", password="***")
    assert line.startswith(f"broker {masked} refused virtual host 'nope': "), line
    assert "Connection.OpenOk" not in line
    assert line.endswith("attempts)") or line.endswith("attempt)"), line


def test_a_refused_login_is_one_line_and_the_broker_logs_it(
    gear_cli: Invoke, running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    url = with_path(running.url, password="wrong")
    with caplog.at_level(logging.WARNING, logger="gear.broker"):
        line = one_line(gear_cli("call", running.repo(), "status", "-u", url, "-t", "0.5"), ExitCode.CONNECT)
    masked = with_path(running.url, password="***")
    assert line.startswith(f"broker {masked} refused the login of user 'guest': ACCESS_REFUSED"), line
    assert "wrong" not in line
    if running.broker is not None:  # the reference broker: its log says why, as the message promises
        refused = [r.getMessage() for r in caplog.records if r.name == "gear.broker"]
        assert any("PLAIN login refused" in m and "invalid credentials" in m for m in refused), refused


def test_no_broker_at_all_is_one_line(gear_cli: Invoke) -> None:
    result = gear_cli("call", "REPO.h1", "status", "-u", "amqp://guest:pw@127.0.0.1:1/", "-t", "0.3")
    line = one_line(result, ExitCode.CONNECT)
    assert line.startswith("cannot connect to amqp://guest:***@127.0.0.1:1/: "), line
    assert "(gave up after 0.3s, " in line


def test_an_unroutable_call_names_the_broker_and_the_attempts(gear_cli: Invoke, running: Running) -> None:
    nobody = f"NOPE{uuid.uuid4().hex[:6]}"
    line = one_line(gear_cli("call", nobody, "status", "-t", "30"), ExitCode.UNROUTABLE)
    # returned twice: it fails long before its 30 s deadline, and says on which broker
    masked = with_path(running.url, path=URL(running.url).path, password="***")
    assert line == f"no queue bound for {nobody!r} on {masked} (2 attempt(s) returned)"


# -- the four forms: what the user typed, not what the CLI built ---------------------------------


def test_send_multicast_takes_the_address_as_typed(gear_cli: Invoke, running: Running) -> None:
    ctrls = f"{running.names.ctrl}.*"
    result = gear_cli("send", "multicast", ctrls, "status", "--call", "--json")
    assert result.exit_code == 0, result.output
    assert len(json_out(result)["replies"]) == len(running.system.ctrls)
    cast = gear_cli("send", "multicast", ctrls, "status")
    assert cast.exit_code == 0, cast.output
    assert f"to {ctrls} " in cast.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["stateless", "CTRL.*"], "invalid service TYPE 'CTRL.*': "),
        (["stateless", "REPO.h1"], "invalid service TYPE 'REPO.h1': "),
        (["multicast", "*.*"], "invalid service TYPE '*.*': "),
        (["p2p", "REPO", "a.b"], "invalid HOST 'a.b': "),
    ],
)
def test_send_refuses_a_word_by_what_was_typed(args: list[str], expected: str) -> None:
    line = one_line(run_cli("send", *args, "status", "-u", "amqp://h/"), ExitCode.USAGE)
    assert line.startswith(expected), line
    assert ".*.*" not in line
    hints = {"CTRL.*": "`gear send multicast CTRL METHOD`", "REPO.h1": "`gear send p2p REPO h1 METHOD`"}
    hints["*.*"] = "`gear send broadcast METHOD`"
    if args[1] in hints:
        assert line.endswith(f"{args[1]} is an address: {hints[args[1]]}"), line


# -- fan-out with nobody there, or nobody answering ----------------------------------------------


@pytest.mark.parametrize("command", ["gather", "nodes"])
def test_a_fanout_nobody_is_bound_for_exits_5_in_one_line(
    gear_cli: Invoke, running: Running, command: str
) -> None:
    nobody = f"NOPE{uuid.uuid4().hex[:6]}"
    args = ["gather", f"{nobody}.*", "status"] if command == "gather" else ["nodes", nobody]
    result = gear_cli(*args)
    line = one_line(result, ExitCode.UNROUTABLE)
    masked = with_path(running.url, path=URL(running.url).path, password="***")
    assert line.startswith(f"no {nobody} instance on {masked}"), line
    assert f"nothing is bound for {nobody}.*" in line
    assert result.stdout == "", "no table and no '0 replied' before the error"
    doc = json_out(gear_cli(*args, "--json"))
    assert (doc["ok"], doc["error"]["exit_code"]) == (False, ExitCode.UNROUTABLE)


@asynccontextmanager
async def _dead_instance(url: str, exchange: str, type_: str) -> AsyncIterator[None]:
    """A queue bound for ``TYPE.*`` that nobody consumes: an instance that died a moment ago."""
    import aio_pika

    from gear import Address

    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel()
        gear_exchange = await channel.declare_exchange(exchange, aio_pika.ExchangeType.TOPIC, durable=True)
        queue = await channel.declare_queue(
            f"{type_}.dead", auto_delete=False, arguments={"x-expires": 60_000}
        )
        await queue.bind(gear_exchange, Address.parse(f"{type_}.*").routing_key)
        try:
            yield
        finally:
            await queue.delete(if_unused=False, if_empty=False)


@pytest.fixture
def dead_type(running: Running) -> Iterator[str]:
    type_ = f"DEAD{uuid.uuid4().hex[:6]}"
    dead = _dead_instance(running.url, running.names.exchange, type_)
    running.background.run(dead.__aenter__())
    try:
        yield type_
    finally:
        running.background.run(dead.__aexit__(None, None, None))


def test_nodes_with_nobody_answering_exits_4(gear_cli: Invoke, dead_type: str) -> None:
    result = gear_cli("nodes", dead_type, "-t", "0.3")
    assert (
        one_line(result, ExitCode.TIMEOUT) == f"no instance answered gear.ping on {dead_type}.* within 0.3s"
    )
    assert result.stdout == ""


def test_gather_with_nobody_answering_is_one_line(gear_cli: Invoke, dead_type: str) -> None:
    result = gear_cli("gather", f"{dead_type}.*", "status", "-t", "0.3")
    assert one_line(result, ExitCode.TIMEOUT) == f"nobody answered status on {dead_type}.* within 0.3s"
    assert result.stdout == "", "no '0 replied' line before the error"


# -- help, traces --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "says"),
    [
        (["call"], "for the reply"),
        (["cast"], "confirm the cast"),
        (["gather"], "for replies"),
        (["nodes"], "answers to the ping"),
        (["send", "stateless"], "with --call for the reply"),
        (["dead-letters"], "connect and read"),
    ],
    ids=" ".join,
)
def test_timeout_help_says_what_each_command_waits_for(command: list[str], says: str) -> None:
    text = " ".join(run_cli(*command, "--help").stdout.split())
    help_of_t = text.split("-t, --timeout <float range> ", 1)[1]
    assert help_of_t.startswith("Seconds"), help_of_t[:80]
    assert says in help_of_t.split("[default")[0]
    if command == ["cast"]:
        assert "replies" not in help_of_t.split("[default")[0]


def test_traces_on_a_missing_folder_says_it_once(tmp_path: Path) -> None:
    missing = tmp_path / "nothing-here"
    line = one_line(run_cli("traces", "analyze", str(missing), "--out", str(tmp_path / "o")), ExitCode.USAGE)
    assert line == f"no trace files at {missing}: no such file or directory"
    empty = tmp_path / "empty"
    empty.mkdir()
    line = one_line(run_cli("traces", "analyze", str(empty), "--out", str(tmp_path / "o")), ExitCode.USAGE)
    assert line == f"no trace files at {empty}: the directory holds no *.jsonl file"


# -- gear serve: one line per incident, not one per attempt --------------------------------------


def test_serve_against_no_broker_logs_the_incident_once_then_gives_up() -> None:
    env = {**os.environ, "GEAR_CONNECT_WAIT": "3"}
    for name in ("GEAR_URL", "GEAR_TYPE", "GEAR_HOST", "GEAR_TRACE"):
        env.pop(name, None)
    done = subprocess.run(
        [
            *GEAR,
            "serve",
            "gear.examples.repo:create_service",
            "--host",
            "r1",
            "-u",
            "amqp://guest:pw@127.0.0.1:1/",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == ExitCode.CONNECT, done.stderr
    warnings = [line for line in done.stderr.splitlines() if " WARNING " in line]
    assert len(warnings) == 1, done.stderr  # many attempts in 3 s, one line
    assert "repeats at most once a minute" in warnings[0]
    last = done.stderr.splitlines()[-1]
    assert last.startswith("gear: cannot connect to amqp://guest:***@127.0.0.1:1/: "), last
    assert "(gave up after 3s, " in last
    assert "Traceback" not in done.stderr

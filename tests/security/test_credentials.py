"""Passwords never leak: everything a run produces is grepped for them.

The run covers the SDK (a working connection, a forced reconnect, a refused login, an unreachable
broker, a malformed URL), its reprs, exceptions and tracebacks, DEBUG logs of every logger (aiormq and
asyncio included), trace files, and the CLI (plain and ``--json``, a broker and a server at DEBUG).
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import signal
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

import gear
from gear.broker import Broker
from tests.conftest import unique

GEAR = [sys.executable, "-c", "from gear.cli.main import app; app()"]


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> str:
    done = subprocess.run(
        [*GEAR, *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )
    return f"$ gear {args[0]} ...\n{done.stdout}\n{done.stderr}"  # not the arguments: they hold the secret


def _cli_until_line(args: list[str], env: dict[str, str]) -> str:
    """Start a long-running command, wait for its first line of output, stop it, return everything."""
    proc = subprocess.Popen(
        [*GEAR, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **env}
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    return f"$ gear {args[0]} ...\n{first}{out}\n{err}"


async def _sdk_run(secret: str, wrong: str, produced: list[str]) -> None:
    async with Broker(port=0, users={"guest": "guest", "app": secret}) as broker:
        url = f"amqp://app:{secret}@127.0.0.1:{broker.port}/"
        type_ = unique("LEAK")
        server = gear.Service(type_, "h1", url=url, reconnect_initial=0.05)

        @server.handler("echo")
        async def echo(n: int) -> int:
            return n

        client = gear.Service(unique("WEB"), "w1", url=url, serve=False, reconnect_initial=0.05)
        produced += [repr(server), repr(server.settings), str(server.settings), repr(client.settings)]
        async with server, client:
            assert await client.rpc.call(f"{type_}.h1", "echo", 1, timeout=10) == 1
            await broker.close_all_connections("leak test")  # both reconnect: "reconnected to ..." lines
            assert await client.rpc.call(f"{type_}.h1", "echo", 2, timeout=20) == 2
        failures: list[BaseException] = []
        for bad in (
            f"amqp://app:{wrong}@127.0.0.1:{broker.port}/",  # refused login
            f"amqp://app:{secret}@127.0.0.1:1/",  # nobody listens
        ):
            svc = gear.Service(unique("WEB"), "w1", url=bad, serve=False, connect_wait=0.3)
            with pytest.raises(gear.ConnectError) as info:
                await svc.start()
            failures.append(info.value)
        with pytest.raises(gear.ConfigurationError) as config_error:
            gear.Service("WEB", "w1", url=f"http://app:{secret}@127.0.0.1/")
        failures.append(config_error.value)
        for exc in failures:
            produced += [str(exc), repr(exc), "".join(traceback.format_exception(exc))]


@pytest.mark.slow
def test_no_password_in_anything_a_run_produced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret, wrong = f"S3cret-{unique('')}", f"Wr0ng-{unique('')}"
    traces = tmp_path / "traces"
    monkeypatch.setenv("GEAR_TRACE", str(traces))
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    produced: list[str] = []
    try:
        asyncio.run(_sdk_run(secret, wrong, produced))
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    produced.append(log.getvalue())
    produced += [p.read_text(errors="replace") for p in traces.rglob("*") if p.is_file()]

    env = {"GEAR_CONNECT_WAIT": "0.5", "GEAR_TRACE": str(traces / "cli")}
    unreachable = f"amqp://app:{secret}@127.0.0.1:1/"
    produced.append(_cli("call", "NOBODY.h1", "status", "--url", unreachable, "-t", "0.5", env=env))
    produced.append(_cli("call", "NOBODY.h1", "status", "--url", unreachable, "-t", "0.5", "--json", env=env))
    produced.append(_cli("cast", "NOBODY", "x", "--url", f"http://app:{secret}@h/", "--json", env=env))
    produced.append(
        _cli_until_line(
            ["broker", "--port", "0", "--log-level", "DEBUG"], {"GEAR_BROKER_USERS": f"app:{secret}"}
        )
    )
    produced.append(
        _cli(
            "serve",
            "gear.examples.repo:create_service",
            "--url",
            unreachable,
            "--log-level",
            "DEBUG",
            env=env,
        )
    )
    produced += [p.read_text(errors="replace") for p in (traces / "cli").rglob("*") if p.is_file()]
    assert any(p.is_file() for p in traces.rglob("*.jsonl*")), "trace files were written and read"

    everything = "\n".join(produced)
    assert "app:***@" in everything, "the URLs were shown, masked (the grep below is not vacuous)"
    assert "reconnected to" in everything, "the reconnect log line, which names the URL, was produced"
    for password in (secret, wrong):
        lines = [line for line in everything.splitlines() if password in line]
        assert not lines, f"the password leaked in {len(lines)} line(s), e.g. {lines[:3]}"

"""A Kubernetes-style rolling stop: SIGTERM to one of two ``gear serve`` instances during a stream of
calls. ``/readyz`` turns 503 first, while the instance still has requests in flight; then it drains;
every call made is answered (by it or by the other instance): none is lost."""

from __future__ import annotations

import asyncio
import functools
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import gear
from gear.broker import Broker
from tests.fleet import eventually
from tests.metrics._scrape import get

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(url: str, host: str, port: int) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "GEAR_URL": url,
        "GEAR_TYPE": "WORK",
        "GEAR_HOST": host,
        "GEAR_METRICS_PORT": str(port),
        "GEAR_METRICS_BIND": "127.0.0.1",
        "GEAR_DRAIN_TIMEOUT": "10",
        # Handlers take long enough that a watcher polling every 20 ms sees the 503 while they run,
        # even on a machine busy with a parallel test run (0.2 s was too short there).
        "DRAIN_TEST_WORK_S": "1.0",
        "PYTHONPATH": str(ROOT),
    }
    command = [sys.executable, "-m", "gear.cli", "serve", "tests.metrics._drain_service:create_service"]
    return subprocess.Popen(command, env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True)


def _watch_readiness(port: int, until: float) -> list[tuple[float, int, dict]]:
    """Poll ``/readyz`` every 20 ms until it stops answering or ``until``: (time, status, body)."""
    seen = []
    while time.monotonic() < until:
        try:
            status, body = get(port, "/readyz")
        except OSError:
            break  # the process closed its port: it stopped
        seen.append((time.monotonic(), status, json.loads(body)))
        time.sleep(0.02)
    return seen


@pytest.mark.timeout(120)
async def test_sigterm_turns_readiness_off_first_and_loses_no_call() -> None:
    async with Broker(port=0) as broker:
        ports = {"a": _free_port(), "b": _free_port()}
        servers = {host: _serve(broker.url, host, port) for host, port in ports.items()}
        client = gear.Service.client(url=broker.url, timeout=20)
        try:
            loop = asyncio.get_running_loop()
            for port in ports.values():
                await eventually(functools.partial(_ready, port), limit=30, what=f"instance on {port} ready")
            await client.start()
            answered: Counter[str] = Counter()
            failures: list[BaseException] = []
            sent = 0
            streaming = True

            async def caller() -> None:
                nonlocal sent
                while streaming:
                    sent += 1
                    try:
                        reply = await client.rpc.call("WORK", "work", sent)
                        answered[reply["by"]] += 1
                    except gear.GearError as exc:
                        failures.append(exc)

            callers = [asyncio.create_task(caller()) for _ in range(64)]
            await eventually(lambda: answered["WORK.a"] >= 50, limit=30, what="instance a serving")
            watch = loop.run_in_executor(None, _watch_readiness, ports["a"], time.monotonic() + 30)
            await asyncio.sleep(0.2)
            terminated = time.monotonic()
            servers["a"].send_signal(signal.SIGTERM)
            returncode = await loop.run_in_executor(None, servers["a"].wait, 30)
            await asyncio.sleep(1.0)  # the stream goes on to b alone
            streaming = False
            await asyncio.gather(*callers)
            seen = await watch
        finally:
            await client.stop()
            for process in servers.values():
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
                    process.wait(timeout=30)

    assert returncode == 0, servers["a"].stderr.read() if servers["a"].stderr else ""
    assert failures == []
    assert sum(answered.values()) == sent  # every call made was answered: 0 lost
    assert answered["WORK.b"] > 0
    after = [(t, status, body) for t, status, body in seen if t >= terminated]
    first_unready = next((entry for entry in after if entry[1] == 503), None)
    assert first_unready is not None, "readiness never went false before the port closed"
    _, _, body = first_unready
    assert body["reasons"][0] in ("stopping", "draining")
    assert body["handlers_in_flight"] > 0, "readiness went false only after the drain"
    assert all(status == 200 for t, status, _ in seen if t < terminated)


@pytest.mark.timeout(60)
async def test_a_probe_being_answered_when_the_instance_stops_gets_its_whole_answer() -> None:
    """A probe that a stopping instance has accepted is answered in full before the process exits
    (its answering thread is a daemon: exiting under it would cut the answer short, even to a bare
    status line, which is how a probe polling through a rolling stop once read an empty body)."""
    async with Broker(port=0) as broker:
        port = _free_port()
        server = _serve(broker.url, "a", port)
        try:
            await eventually(functools.partial(_ready, port), limit=30, what="instance ready")
            loop = asyncio.get_running_loop()
            probe = socket.create_connection(("127.0.0.1", port), timeout=10)
            with probe:
                probe.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # not finished yet
                server.send_signal(signal.SIGTERM)
                await eventually(lambda: not _listening(port), limit=30, what="the port closed")
                await asyncio.sleep(0.3)  # time enough for a process that does not wait to exit
                probe.sendall(b"\r\n")
                answer = http.client.HTTPResponse(probe)
                await loop.run_in_executor(None, answer.begin)
                body = await loop.run_in_executor(None, answer.read)
            returncode = await loop.run_in_executor(None, server.wait, 30)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait(timeout=30)

    assert returncode == 0
    assert answer.status == 503
    assert json.loads(body)["ready"] is False


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except OSError:
        return False
    return True


def _ready(port: int) -> bool:
    try:
        return get(port, "/readyz")[0] == 200
    except OSError:
        return False

"""A real Prometheus (Debian's ``prometheus`` package) scrapes a running service, its caller and the
reference broker; ``rate(...)`` and ``histogram_quantile(...)`` through its HTTP API agree with the
calls the test made. Skipped where the package is not installed (``apt-get install -y prometheus``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import gear
from gear.broker import Broker
from gear.broker.shell.metrics import MetricsServer

pytestmark = pytest.mark.slow

_PROMETHEUS = shutil.which("prometheus")
_INTERVAL = 1.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A Prometheus server on a free loopback port with its own data directory; its scrape targets
    are written to ``targets.json`` (file service discovery) by the test."""
    if _PROMETHEUS is None:
        pytest.skip("Debian's prometheus is not installed (apt-get install -y prometheus)")
    port = _free_port()
    targets = tmp_path / "targets.json"
    targets.write_text("[]")
    config = {
        "global": {"scrape_interval": f"{_INTERVAL:g}s", "evaluation_interval": f"{_INTERVAL:g}s"},
        "scrape_configs": [
            {"job_name": "gear", "file_sd_configs": [{"files": [str(targets)], "refresh_interval": "1s"}]}
        ],
    }
    (tmp_path / "prometheus.yml").write_text(json.dumps(config))
    command = [
        _PROMETHEUS,
        f"--config.file={tmp_path / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not _answers(port, "/-/ready"):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"prometheus did not start: {process.stderr.read() if process.stderr else ''}")
            time.sleep(0.2)
        yield port, targets
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def _answers(port: int, path: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def _query(port: int, expr: str, at: float) -> list[dict]:
    query = urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"})
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/query?{query}", timeout=10) as answer:
        found = json.loads(answer.read())
    assert found["status"] == "success", found
    return found["data"]["result"]


def _scalar(port: int, expr: str, at: float) -> float:
    result = _query(port, expr, at)
    assert len(result) == 1, (expr, result)
    return float(result[0]["value"][1])


@pytest.mark.timeout(180)
async def test_prometheus_sees_the_calls_made(prometheus: tuple[int, Path]) -> None:
    port, targets = prometheus
    loop = asyncio.get_running_loop()
    calls, failing, slow = 200, 20, 10
    async with Broker(port=0) as broker:
        exporter = MetricsServer(broker, loop, 0, "127.0.0.1")
        repo = gear.Service("REPO", "r1", url=broker.url, metrics_port=0, metrics_bind="127.0.0.1")
        client = gear.Service.client(url=broker.url, metrics_port=0, metrics_bind="127.0.0.1")

        @repo.handler("put")
        async def put(item: dict) -> dict:
            if item.get("fail"):
                raise KeyError("no such item")
            if item.get("slow"):
                await asyncio.sleep(0.06)
            return item

        async with repo, client:
            # every series exists before the first scrape (Prometheus sees a series' increase from its
            # first sample on): one call of each kind
            await client.rpc.call("REPO", "put", {})
            with pytest.raises(gear.RemoteError):
                await client.rpc.call("REPO", "put", {"fail": True})
            jobs = {"repo": repo.metrics_port, "client": client.metrics_port, "broker": exporter.port}
            targets.write_text(
                json.dumps([{"targets": [f"127.0.0.1:{p}"], "labels": {"role": r}} for r, p in jobs.items()])
            )
            await _until(lambda: _scalar(port, "count(up == 1)", time.time()) == 3)
            await asyncio.sleep(3 * _INTERVAL)
            start = time.time()
            for n in range(calls):
                payload = {"fail": n < failing, "slow": failing <= n < failing + slow}
                with contextlib.suppress(gear.RemoteError):
                    await client.rpc.call("REPO", "put", payload)
            await asyncio.sleep(4 * _INTERVAL)  # scraped after the last call
            end = time.time()
            window = f"{int(end - start) + 2}s"
            counts = 'rpc_client_call_duration_seconds_count{role="client",rpc_method="REPO/put"}'

            made = _scalar(port, f"sum(increase({counts}[{window}]))", end)
            assert calls * 0.75 <= made <= calls * 1.25
            error_share = _scalar(
                port,
                f'sum(rate({counts[:-1]},error_type="KeyError"}}[{window}])) / sum(rate({counts}[{window}]))',
                end,
            )
            assert error_share == pytest.approx(failing / calls, abs=0.02)
            assert _scalar(port, f"sum({counts})", end) == calls + 2
            buckets = 'rpc_client_call_duration_seconds_bucket{role="client",rpc_method="REPO/put"}'
            p50 = _scalar(port, f"histogram_quantile(0.5, sum by (le) (rate({buckets}[{window}])))", end)
            p99 = _scalar(port, f"histogram_quantile(0.99, sum by (le) (rate({buckets}[{window}])))", end)
            assert p50 < 0.05  # 170 of 200 calls do nothing
            assert 0.05 <= p99 <= 0.2  # 10 of 200 sleep 60 ms
            served = 'rpc_server_call_duration_seconds_count{role="repo",rpc_method="REPO/put"}'
            assert _scalar(port, f"sum({served})", end) == calls + 2
            failed = _scalar(port, f'sum({served[:-1]},error_type="KeyError"}})', end)
            assert failed == failing + 1
            assert _scalar(port, 'gear_link_up{role="repo"}', end) == 1
            assert _scalar(port, 'gear_ready{role="repo"}', end) == 1
            received = _scalar(
                port,
                f'sum(increase(rabbitmq_global_messages_received_total{{role="broker"}}[{window}]))',
                end,
            )
            assert 2 * calls * 0.75 <= received <= 2 * calls * 1.25  # each call: a request and a reply
            assert _scalar(port, 'rabbitmq_queues{role="broker"}', end) >= 2
            assert _scalar(port, 'rabbitmq_connections{role="broker"}', end) == 2
        exporter.close()


async def _until(check: Callable[[], bool], limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while True:
        try:
            if check():
                return
        except (OSError, AssertionError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {limit}s")
        await asyncio.sleep(0.5)

"""Minutes of ordinary steady traffic: no link is ever lost, no call fails, memory stays flat.

A caller process keeps 1, 16 and 256 calls in flight against a server process (three pairs at once,
for ``GEAR_SOAK_SECONDS``, default 60), on the reference broker (in a process of its own) and on
RabbitMQ. Short polite scenarios hid the watchdog that dropped a healthy link every ~18 s under load;
this is the test that shows it stays fixed. ``benchmarks/soak.py`` runs the same for ten minutes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from gear.testing.soak import Interval, soak
from tests.backends import RabbitMQ

SECONDS = float(os.environ.get("GEAR_SOAK_SECONDS", "60"))
INTERVAL = 10.0
CONCURRENCY = (1, 16, 256)
_READY = re.compile(r"gear broker ready at amqp://[^@]+@127\.0\.0\.1:(\d+)/")

pytestmark = [pytest.mark.soak, pytest.mark.timeout(SECONDS + 240)]


@pytest.fixture
def reference_url() -> Iterator[str]:
    """Gear's reference broker in a process of its own."""
    broker = subprocess.Popen(
        [sys.executable, "-m", "gear.broker", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert broker.stdout is not None
    line = broker.stdout.readline()
    found = _READY.search(line)
    try:
        assert found is not None, f"the broker did not start: {line}{broker.stdout.read(2000)}"
        yield f"amqp://guest:guest@127.0.0.1:{found.group(1)}/"
    finally:
        broker.terminate()
        broker.wait(10)


def _soak_all(url: str) -> dict[int, list[Interval]]:
    with ThreadPoolExecutor(len(CONCURRENCY)) as pool:
        runs = {
            c: pool.submit(soak, url, concurrency=c, seconds=SECONDS, interval=INTERVAL) for c in CONCURRENCY
        }
        return {c: run.result() for c, run in runs.items()}


def _check(results: dict[int, list[Interval]]) -> None:
    for concurrency, intervals in results.items():
        where = f"{concurrency} in flight"
        assert len(intervals) >= SECONDS // INTERVAL, where
        assert all(i.calls > 0 for i in intervals), f"{where}: an interval with no call: {intervals}"
        assert [i.failed for i in intervals if i.failed] == [], where
        last = intervals[-1]
        assert last.caller_links_lost == 0, (
            f"{where}: the caller lost its link {last.caller_links_lost} time(s)"
        )
        assert last.server_reconnects == 0, (
            f"{where}: the server reconnected {last.server_reconnects} time(s)"
        )
        for side in ("caller_rss_mib", "server_rss_mib"):
            warm = getattr(intervals[1], side)  # after the first interval: imports, pools and buffers grown
            end = max(getattr(i, side) for i in intervals[2:])
            assert end <= warm * 1.10 + 4, f"{where}: {side} grew from {warm:.1f} to {end:.1f} MiB"


def test_steady_load_on_the_reference_broker(reference_url: str) -> None:
    _check(_soak_all(reference_url))


@pytest.mark.rabbitmq
def test_steady_load_on_rabbitmq(rabbitmq: RabbitMQ) -> None:
    _check(_soak_all(rabbitmq.url))

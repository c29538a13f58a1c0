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

from gear.serving.duplicates import DuplicateWindow
from gear.testing.soak import Interval, soak
from tests.backends import RabbitMQ

SECONDS = float(os.environ.get("GEAR_SOAK_SECONDS", "60"))
INTERVAL = 10.0
CONCURRENCY = (1, 16, 256)
_WINDOW_ENTRY_BYTES = 512
"""Memory per duplicate-window entry, with room for the allocator (tracemalloc measures ~290 bytes:
a request id, its expiry and a 100-byte cached reply)."""
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
        warm = intervals[1]  # after the first interval: imports, pools and buffers grown
        later = intervals[2:]
        caller_end = max(i.caller_rss_mib or 0.0 for i in later)
        assert caller_end <= (warm.caller_rss_mib or 0.0) * 1.10 + 4, (
            f"{where}: the caller's memory grew from {warm.caller_rss_mib:.1f} to {caller_end:.1f} MiB"
        )
        # The server's duplicate window holds each request id until its call's deadline (30 s by
        # default), so it fills with the call rate up to its bound: memory it explains is not a leak.
        windows = [i.server_window or 0 for i in intervals]
        assert None not in [i.server_window for i in intervals], f"{where}: a ping went unanswered"
        assert max(windows) <= DuplicateWindow().max_entries, (where, windows)
        window_growth = max(0, max(windows[2:]) - windows[1])
        allowed = (warm.server_rss_mib or 0.0) * 1.10 + 4 + window_growth * _WINDOW_ENTRY_BYTES / 2**20
        server_end = max(i.server_rss_mib or 0.0 for i in later)
        assert server_end <= allowed, (
            f"{where}: the server's memory grew from {warm.server_rss_mib:.1f} to {server_end:.1f} MiB, "
            f"more than its duplicate window explains ({warm.server_window} -> {windows} entries)"
        )


def test_steady_load_on_the_reference_broker(reference_url: str) -> None:
    _check(_soak_all(reference_url))


@pytest.mark.rabbitmq
def test_steady_load_on_rabbitmq(rabbitmq: RabbitMQ) -> None:
    _check(_soak_all(rabbitmq.url))

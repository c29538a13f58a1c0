"""The ``cluster`` backend: tests against a local 3-node RabbitMQ cluster.

The session uses the cluster ``scripts/rabbitmq-cluster`` runs (``GEAR_CLUSTER_NAME`` /
``GEAR_CLUSTER_PORT`` pick which one), starting it if it is not running and stopping it at the end if
it started it. ``GEAR_TEST_CLUSTER`` chooses what happens without a cluster:

* unset: start one; skip with the reason if ``rabbitmq-server`` is missing or it cannot start;
* ``required`` (``.ci/run``): fail instead of skipping;
* ``off``: skip all cluster tests (no cluster is booted).

Every test that stopped or killed a node gets all three back (clustered) before the next one starts.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.cluster._cluster import ClusterHandle, find_cluster, locked, run_script

ENV = "GEAR_TEST_CLUSTER"
LOCK_WAIT = 600.0


def _mode() -> str:
    return os.environ.get(ENV, "").strip().lower()


@pytest.fixture(scope="session")
def _cluster_session() -> Iterator[tuple[ClusterHandle | None, str]]:
    if _mode() in ("off", "0", "no", "false"):
        yield None, f"cluster tests are off ({ENV}={_mode()})"
        return
    with locked(LOCK_WAIT) as got:
        if not got:
            yield None, f"another test session held the cluster for {LOCK_WAIT:g}s"
            return
        handle, reason = find_cluster(may_start=True)
        try:
            yield handle, reason
        finally:
            if handle is not None and handle.started_here:
                run_script("stop")


@pytest.fixture
def cluster(_cluster_session: tuple[ClusterHandle | None, str]) -> Iterator[ClusterHandle]:
    """The running 3-node cluster; nodes a test disturbed are brought back after it."""
    handle, reason = _cluster_session
    if handle is None:
        if _mode() == "required":
            pytest.fail(f"{ENV}=required but: {reason}")
        pytest.skip(reason)
    try:
        yield handle
    finally:
        handle.heal()

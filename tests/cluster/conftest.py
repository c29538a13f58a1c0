"""The ``cluster`` backend: tests against a local 3-node RabbitMQ cluster.

The session uses the cluster ``scripts/rabbitmq-cluster`` runs (``GEAR_CLUSTER_NAME`` /
``GEAR_CLUSTER_PORT`` pick which one). It boots three nodes on fixed ports, so it is started only when
asked; ``GEAR_TEST_CLUSTER`` says what to do:

* unset: use the cluster if one is running, else skip (nothing is booted);
* ``start``: start one if none runs (and stop it at the end); skip with the reason if
  ``rabbitmq-server`` is missing or it cannot start;
* ``required`` (``.ci/run``): the same, but fail instead of skipping;
* ``off``: skip all cluster tests.

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
    may_start = _mode() in ("start", "required", "1", "yes", "true")
    if not may_start:  # not asked to boot one: use it only if it already runs (no lock to wait for)
        handle, reason = find_cluster(may_start=False)
        if handle is None:
            yield None, f"{reason} (or set {ENV}=start to boot one)"
            return
    with locked(LOCK_WAIT) as got:
        if not got:
            yield None, f"another test session held the cluster for {LOCK_WAIT:g}s"
            return
        handle, reason = find_cluster(may_start=may_start)
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

"""The ``cluster`` backends: tests against local 3-node RabbitMQ clusters.

The ``cluster`` fixture is the RabbitMQ 3.10 cluster ``scripts/rabbitmq-cluster`` runs
(``GEAR_CLUSTER_NAME`` / ``GEAR_CLUSTER_PORT`` pick which one); ``cluster43`` is the RabbitMQ 4.3 one of
``scripts/rabbitmq-cluster43`` (``GEAR_TEST_CLUSTER43`` says what to do with it, as below; it needs root);
``any_cluster`` is parametrized over both. Each boots three nodes on fixed ports, so it is started only
when asked; ``GEAR_TEST_CLUSTER`` (``GEAR_TEST_CLUSTER43``) says what to do:

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

from tests.cluster._cluster import SCRIPTS, ClusterHandle, find_cluster, locked, run_script

ENV = "GEAR_TEST_CLUSTER"
ENVS = {"3.10": ENV, "4.3": "GEAR_TEST_CLUSTER43"}
LOCK_WAIT = 600.0


def _mode(release: str = "3.10") -> str:
    return os.environ.get(ENVS[release], "").strip().lower()


def _session(release: str) -> Iterator[tuple[ClusterHandle | None, str]]:
    env, mode = ENVS[release], _mode(release)
    if mode in ("off", "0", "no", "false"):
        yield None, f"cluster tests are off ({env}={mode})"
        return
    may_start = mode in ("start", "required", "1", "yes", "true")
    if not may_start:  # not asked to boot one: use it only if it already runs (no lock to wait for)
        handle, reason = find_cluster(may_start=False, release=release)
        if handle is None:
            yield None, f"{reason} (or set {env}=start to boot one)"
            return
    with locked(LOCK_WAIT, release) as got:
        if not got:
            yield None, f"another test session held the {release} cluster for {LOCK_WAIT:g}s"
            return
        handle, reason = find_cluster(may_start=may_start, release=release)
        try:
            yield handle, reason
        finally:
            if handle is not None and handle.started_here:
                run_script("stop", script=SCRIPTS[release])


@pytest.fixture(scope="session")
def _cluster_session() -> Iterator[tuple[ClusterHandle | None, str]]:
    yield from _session("3.10")


@pytest.fixture(scope="session")
def _cluster43_session() -> Iterator[tuple[ClusterHandle | None, str]]:
    yield from _session("4.3")


def _handle(found: tuple[ClusterHandle | None, str], release: str) -> Iterator[ClusterHandle]:
    handle, reason = found
    if handle is None:
        if _mode(release) == "required":
            pytest.fail(f"{ENVS[release]}=required but: {reason}")
        pytest.skip(reason)
    try:
        yield handle
    finally:
        handle.heal()


@pytest.fixture
def cluster(_cluster_session: tuple[ClusterHandle | None, str]) -> Iterator[ClusterHandle]:
    """The running 3-node RabbitMQ 3.10 cluster; nodes a test disturbed are brought back after it."""
    yield from _handle(_cluster_session, "3.10")


@pytest.fixture
def cluster43(_cluster43_session: tuple[ClusterHandle | None, str]) -> Iterator[ClusterHandle]:
    """The running 3-node RabbitMQ 4.3 cluster; what a test disturbed is healed after it."""
    yield from _handle(_cluster43_session, "4.3")


@pytest.fixture(params=["3.10", "4.3"])
def any_cluster(request: pytest.FixtureRequest) -> ClusterHandle:
    """Each cluster in turn (3.10, then 4.3)."""
    handle: ClusterHandle = request.getfixturevalue("cluster" if request.param == "3.10" else "cluster43")
    return handle

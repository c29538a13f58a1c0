"""The test backends' plumbing: clean imports, a RabbitMQ looked for only when a test needs one, and
containers that keep off every port the host's brokers use."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.rabbitmq_container import config_text, environment, pick_ports

ROOT = Path(__file__).resolve().parents[1]
HOST_PORTS = {5672, 4369, 25672, 15672, 15692, *range(5701, 5710), *range(25701, 25710)}
"""The host's RabbitMQ (AMQP, epmd, distribution, management, Prometheus) and the local cluster's nodes."""


def _imports_cleanly(module: str) -> subprocess.CompletedProcess[str]:
    """Import ``module`` in a fresh interpreter where any warning is an error."""
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", f"import {module}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_importing_the_backends_warns_nothing() -> None:
    done = _imports_cleanly("tests.backends")
    assert done.returncode == 0, done.stderr


def test_the_import_check_catches_a_deprecated_module() -> None:
    """The check above is not blind: testcontainers' deprecated shim fails it."""
    done = _imports_cleanly("testcontainers.rabbitmq")
    if "ModuleNotFoundError" in done.stderr:
        pytest.skip("this testcontainers has no deprecated testcontainers.rabbitmq shim to catch")
    assert done.returncode != 0
    assert "DeprecationWarning" in done.stderr


def test_container_ports_are_free_distinct_and_not_the_hosts() -> None:
    for _ in range(20):
        ports = pick_ports()
        chosen = [ports.amqp, ports.dist, ports.epmd, ports.management, ports.prometheus]
        assert len(set(chosen)) == len(chosen)
        assert not set(chosen) & HOST_PORTS
        assert ports.dist + 10010 <= 65535, "rabbitmqctl listens at the distribution port + 10000..10010"


def test_container_listens_on_loopback_only_under_its_own_node_name() -> None:
    ports = pick_ports()
    conf = dict(
        line.split(" = ", 1) for line in config_text(ports).splitlines() if line and not line.startswith("#")
    )
    assert conf["listeners.tcp.default"] == f"127.0.0.1:{ports.amqp}"
    assert conf["management.tcp.ip"] == conf["prometheus.tcp.ip"] == "127.0.0.1"
    assert {int(conf["management.tcp.port"]), int(conf["prometheus.tcp.port"])} == {
        ports.management,
        ports.prometheus,
    }
    env = environment(ports)
    assert env["RABBITMQ_NODENAME"] == f"gear-test-{ports.amqp}@localhost"
    assert env["ERL_EPMD_PORT"] == str(ports.epmd)
    assert env["ERL_EPMD_ADDRESS"] == "127.0.0.1"
    assert env["RABBITMQ_DIST_PORT"] == str(ports.dist)
    assert "inet_dist_use_interface {127,0,0,1}" in env["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"]


def _pytest(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "GEAR_TEST_AMQP_URL"}
    env["DOCKER_HOST"] = "unix:///nonexistent/gear-test-docker.sock"  # no engine answers here
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-q", "-rs", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.slow
def test_rabbitmq_is_looked_for_only_when_a_selected_test_needs_it() -> None:
    target = "tests/conformance/test_tx.py"
    without = _pytest(target, "-m", "not rabbitmq")
    assert "no RabbitMQ" not in without
    assert " passed" in without
    with_rabbitmq = _pytest(target, "-m", "rabbitmq")
    assert "no RabbitMQ: set GEAR_TEST_AMQP_URL" in with_rabbitmq


# -- which broker a backend is, and which rabbitmqctl controls it --------------------------------------


def test_a_url_no_local_node_serves_gets_no_rabbitmqctl(monkeypatch: pytest.MonkeyPatch) -> None:
    """A URL naming another broker must never be controlled by the system node's rabbitmqctl."""
    from tests.backends import ENV_CTL, ctl_for_url

    monkeypatch.delenv(ENV_CTL, raising=False)
    ctl, note = ctl_for_url("amqp://guest:guest@127.0.0.1:1/")
    assert ctl is None
    assert ENV_CTL in note, note


def test_the_ctl_command_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.backends import ENV_CTL, ctl_for_url

    monkeypatch.setenv(ENV_CTL, f"{sys.executable} -c 'import sys; print(sys.argv[1:])'")
    ctl, note = ctl_for_url("amqp://guest:guest@127.0.0.1:1/")
    assert ctl is not None
    assert ctl(["status", "-q"]).strip() == "['status', '-q']"
    assert note.startswith(ENV_CTL)


@pytest.mark.rabbitmq
def test_the_local_rabbitmqctl_is_pinned_to_the_node_that_serves_the_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.backends import ENV_CTL, ENV_URL, ctl_for_url, server_properties

    url = os.environ.get(ENV_URL)
    if not url:
        pytest.skip(f"set {ENV_URL} to the RabbitMQ whose rabbitmqctl is on this machine")
    monkeypatch.delenv(ENV_CTL, raising=False)
    ctl, note = ctl_for_url(url)
    if ctl is None:
        pytest.skip(f"no local rabbitmqctl controls {url}: {note}")
    assert note.startswith("rabbitmqctl -n ")
    version = server_properties(url)["version"]
    assert f"RabbitMQ version: {version}" in ctl(["status"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4.3.6", (4, 3, 6)), ("3.10.8+dfsg", (3, 10, 8)), ("4.0.0-rc.1", (4, 0, 0)), ("", ())],
)
def test_broker_versions_parse(text: str, expected: tuple[int, ...]) -> None:
    from tests.backends import version_tuple

    assert version_tuple(text) == expected


async def test_the_reference_broker_names_itself_and_follows_rabbitmq_4_0() -> None:
    from gear.broker import Broker
    from tests.backends import REFERENCE_SEMANTICS, BrokerHandle, server_properties

    async with Broker(port=0) as broker:
        properties = await asyncio.to_thread(server_properties, broker.url)
        handle = BrokerHandle(kind="reference", url=broker.url)
    assert properties["product"] == "Gear reference broker"
    assert handle.semantics == REFERENCE_SEMANTICS == (4, 0)
    assert BrokerHandle(kind="rabbitmq", url="", version=(4, 3, 6)).semantics == (4, 3)

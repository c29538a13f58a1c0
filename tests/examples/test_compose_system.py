"""The compose file's system in containers, and the demo's checks made against it from outside.

``docker-compose up`` starts RabbitMQ, REPO x3, CTRL x2 and WEB, the services built from the project's
Dockerfile; the test then talks to WEB over HTTP and runs the CLI service, as a person would. On an
engine without a bridge (``scripts/docker_engine.py``) every container shares the host's network, so
the test runs docker-compose.yml with the networking switched to loopback: each service gets
``network_mode: host``, RabbitMQ loopback ports of its own (as the test backend's container does), WEB
a free port, and ``GEAR_URL`` points at that RabbitMQ. Services, commands, instances and the rest of
their environment are the file's. Images: ``GEAR_TEST_RABBITMQ_IMAGE`` and ``GEAR_TEST_BASE_IMAGE``
(the Dockerfile's ``BASE_IMAGE``), as ``scripts/docker_engine.py run --images`` sets them.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from gear.examples.hashring import HashRing
from gear.examples.scenario import KEYS
from tests.rabbitmq_container import (
    CONF_FILE,
    DEFAULT_IMAGE,
    ENV_IMAGE,
    TEST_LABEL,
    Ports,
    config_text,
    environment,
    pick_ports,
)

# The first test builds the image and starts the system (the module's fixture): allow for that.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
ENV_BASE_IMAGE = "GEAR_TEST_BASE_IMAGE"
APP_IMAGE = "gear-examples:test"
INSTANCES = {"REPO.repo1", "REPO.repo2", "REPO.repo3", "CTRL.ctrl1", "CTRL.ctrl2", "WEB.web1"}
WAIT = 120.0


def _compose_or_skip() -> str:
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.skip("no docker-compose: scripts/docker_engine.py start installs Debian's")
    return compose


def _engine_or_skip() -> None:
    done = subprocess.run(["docker", "version"], capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        pytest.skip(f"no Docker engine answers (scripts/docker_engine.py start): {done.stderr.strip()[:200]}")


def loopback_variant(
    compose: dict[str, Any], ports: Ports, web_port: int, conf: Path, base_image: str | None
) -> dict[str, Any]:
    """docker-compose.yml with every service on the host's network and RabbitMQ at the given ports."""
    url = f"amqp://guest:guest@127.0.0.1:{ports.amqp}/"
    services: dict[str, dict[str, Any]] = compose["services"]
    for name, spec in services.items():
        spec.pop("ports", None)
        spec.pop("hostname", None)  # the host's network has the host's name
        spec["network_mode"] = "host"
        spec["labels"] = {**(spec.get("labels") or {}), TEST_LABEL: "1"}
        if "build" in spec:
            args = {"BASE_IMAGE": base_image} if base_image else {}
            spec["build"] = {"context": str(ROOT), "network": "host", "args": args}
            spec["image"] = APP_IMAGE
        env = spec.get("environment")
        if isinstance(env, dict) and "GEAR_URL" in env:
            env["GEAR_URL"] = url
        command = spec.get("command")
        if isinstance(command, list) and "--port" in command:
            at = command.index("--port") + 1
            spec["command"] = [*command[:at], str(web_port), *command[at + 1 :], "--bind", "127.0.0.1"]
        if name == "rabbitmq":
            spec["image"] = os.environ.get(ENV_IMAGE) or DEFAULT_IMAGE
            spec["environment"] = environment(ports)
            spec["volumes"] = [f"{conf}:{CONF_FILE}:ro"]
            spec["init"] = True
    return compose


@dataclass
class Composed:
    """The running system: how to run docker-compose on it and where WEB listens."""

    command: list[str]
    web: str

    def compose(
        self, *args: str, timeout: float = 120, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*self.command, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and done.returncode != 0:
            raise AssertionError(f"docker-compose {' '.join(args)}: {done.returncode}\n{done.stderr[-3000:]}")
        return done

    def http(self, method: str, path: str, body: str | None = None) -> tuple[int, Any]:
        request = urllib.request.Request(
            f"{self.web}{path}", data=body.encode() if body is not None else None, method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def statuses(self) -> dict[str, dict[str, Any]]:
        code, replies = self.http("GET", "/status")
        assert code == 200, replies
        return {r["sender"]: r["result"] for r in replies}

    def wait_for_statuses(self, until: Any, what: str) -> dict[str, dict[str, Any]]:
        deadline = time.monotonic() + WAIT
        seen: dict[str, dict[str, Any]] = {}
        while time.monotonic() < deadline:
            try:
                seen = self.statuses()
            except (OSError, AssertionError):
                seen = {}
            if until(seen):
                return seen
            time.sleep(0.5)
        raise AssertionError(f"{what}: not within {WAIT:.0f} s; last status: {seen}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def composed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Composed]:
    compose = _compose_or_skip()
    _engine_or_skip()
    workdir = tmp_path_factory.mktemp("compose")
    ports, web_port = pick_ports(), _free_port()
    conf = workdir / "90-gear-test.conf"
    conf.write_text(config_text(ports))
    variant = loopback_variant(
        yaml.safe_load((ROOT / "docker-compose.yml").read_text()),
        ports,
        web_port,
        conf,
        os.environ.get(ENV_BASE_IMAGE),
    )
    path = workdir / "docker-compose.yml"
    path.write_text(yaml.safe_dump(variant, sort_keys=False))
    system = Composed(
        command=[compose, "-f", str(path), "--project-directory", str(ROOT), "-p", f"gear-test-{ports.amqp}"],
        web=f"http://127.0.0.1:{web_port}",
    )
    try:
        system.compose("config", "-q")
        system.compose("up", "-d", "--build", timeout=900)
        system.wait_for_statuses(lambda s: set(s) == INSTANCES, "every instance answers status")
        yield system
    finally:
        system.compose("down", "--volumes", "--remove-orphans", "--timeout", "10", timeout=300, check=False)


def test_point_to_point_stores_each_key_on_the_repo_its_ring_picks(composed: Composed) -> None:
    ring = HashRing(["repo1", "repo2", "repo3"])
    for key, value in KEYS.items():
        code, stored = composed.http("PUT", f"/items/{key}", value)
        assert code == 200, stored
        assert stored["host"] == ring.host_for(key), (key, stored)


def test_lookups_go_through_any_ctrl_to_the_owning_repo_within_the_deadline(composed: Composed) -> None:
    ring = HashRing(["repo1", "repo2", "repo3"])
    ctrls = set()
    for key, value in KEYS.items():
        code, found = composed.http("GET", f"/items/{key}")
        assert code == 200, found
        assert found["value"] == value
        assert found["repo_host"] == ring.host_for(key)
        assert 0 < found["budget_ms"] <= 5000, "CTRL's nested call inherits what is left of WEB's deadline"
        ctrls.add(found["ctrl_host"])
    assert ctrls == {"ctrl1", "ctrl2"}, "round-robin over the CTRL instances"


def test_multicast_reload_reaches_every_ctrl(composed: Composed) -> None:
    code, _ = composed.http("POST", "/reload", "7")
    assert code == 202
    statuses = composed.wait_for_statuses(
        lambda s: all(s.get(c, {}).get("config_version") == 7 for c in ("CTRL.ctrl1", "CTRL.ctrl2")),
        "CTRL.* reloaded to version 7",
    )
    assert all(statuses[r]["config_version"] == 0 for r in ("REPO.repo1", "REPO.repo2", "REPO.repo3"))


def test_broadcast_refresh_reaches_every_instance_once(composed: Composed) -> None:
    code, _ = composed.http("POST", "/refresh")
    assert code == 202
    statuses = composed.wait_for_statuses(
        lambda s: set(s) == INSTANCES and all(r["refreshes"] >= 1 for r in s.values()),
        "every instance refreshed",
    )
    assert {sender: r["refreshes"] for sender, r in statuses.items()} == dict.fromkeys(INSTANCES, 1)


def test_the_cli_service_lists_the_instances_and_gets_typed_errors(composed: Composed) -> None:
    nodes = composed.compose("run", "--rm", "cli", "gear", "nodes", "--json", timeout=180)
    listed = {node["instance"] for node in json.loads(nodes.stdout)["nodes"]}
    assert listed == INSTANCES, nodes.stdout
    payload = json.dumps({"key": "alice"})
    missing = composed.compose(
        "run", "--rm", "cli", "gear", "call", "REPO.repo1", "delete", "-d", payload, timeout=180, check=False
    )
    assert missing.returncode == 7, missing.stdout + missing.stderr  # METHOD_NOT_FOUND
    unroutable = composed.compose(
        "run",
        "--rm",
        "cli",
        "gear",
        "call",
        "REPO.nohost",
        "get",
        "-d",
        payload,
        "-t",
        "1",
        timeout=180,
        check=False,
    )
    assert unroutable.returncode == 5, unroutable.stdout + unroutable.stderr  # UNROUTABLE


def test_a_stopped_repo_makes_its_lookups_fail_inside_the_deadline(composed: Composed) -> None:
    ring = HashRing(["repo1", "repo2", "repo3"])
    key = next(k for k in KEYS if ring.host_for(k) == "repo3")
    composed.compose("stop", "repo3", timeout=120)
    try:
        code, answer = composed.http("GET", f"/items/{key}")
        assert code == 502, answer  # a RemoteError from CTRL
        assert "CallTimeoutError" in answer["message"], answer
    finally:
        composed.compose("start", "repo3", timeout=120)

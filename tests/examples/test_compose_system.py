"""The single-node system of docker-compose.yml, run as a user runs it: the file as it is, on compose's own
bridge network (services reach RabbitMQ by the name ``rabbitmq``), WEB on its published port.

``docker compose up`` starts RabbitMQ and, once its health check has logged in as a Gear client would,
REPO x3, CTRL x2 and WEB, built from the Dockerfile; the tests then store and read through WEB over
HTTP, run ``gear nodes`` and ``gear demo --url`` in the CLI service, kill a REPO container and start it
again. Compose v2 (``docker compose``) runs it where installed (``test_compose_cluster_system.py`` uses
v1, so both run a system). Images: ``GEAR_TEST_RABBITMQ_IMAGE`` and ``GEAR_TEST_BASE_IMAGE`` (the
Dockerfile's ``BASE_IMAGE``), as ``scripts/docker_engine.py run --images`` sets them; else the file's
defaults. Each step's figures go to ``compose-single.json`` (``tests/examples/compose_run.py``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from gear.examples.hashring import HashRing
from gear.examples.scenario import KEYS
from tests.examples.compose_run import (
    Compose,
    Figures,
    compose_command,
    engine_or_skip,
    http,
    images_env,
    wait_for,
)

# The module's fixture builds the image and starts the system: allow for that.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]

INSTANCES = {"REPO.repo1", "REPO.repo2", "REPO.repo3", "CTRL.ctrl1", "CTRL.ctrl2", "WEB.web1"}
RING = HashRing(["repo1", "repo2", "repo3"])
HEALTH = "/usr/local/bin/gear-rabbitmq-health"
PORT_PREFIX = "185"
"""Ports 185xx: away from the file's default (180xx), which a person on this machine may be using."""


@dataclass
class System:
    """The running project, where WEB answers, and the figures of this run."""

    compose: Compose
    web: str
    figures: Figures

    def http(self, method: str, path: str, body: str | None = None) -> tuple[int, Any]:
        return http(f"{self.web}{path}", method, body)

    def statuses(self) -> dict[str, dict[str, Any]]:
        code, replies = self.http("GET", "/status")
        if code != 200 or not isinstance(replies, list):
            return {}
        return {r["sender"]: r["result"] for r in replies}

    def wait_for_statuses(self, until: Any, what: str) -> dict[str, dict[str, Any]]:
        seen: dict[str, dict[str, Any]] = {}

        def holds() -> bool:
            nonlocal seen
            seen = self.statuses()
            return bool(until(seen))

        wait_for(holds, f"{what} (last status: {seen})", interval=0.5)
        return seen


def _built_from_cache(output: str) -> bool:
    return "Successfully installed" not in output


@pytest.fixture(scope="module")
def system() -> Iterator[System]:
    engine_or_skip()
    name, command, version = compose_command("v2")
    env = images_env()
    figures = Figures(
        "single", compose=f"compose {name} {version}", rabbitmq_image=env.get("GEAR_RABBITMQ_IMAGE", "")
    )
    compose = Compose(command, project="gear-test-single", env=env, port_prefix=PORT_PREFIX)
    system = System(compose, f"http://127.0.0.1:{compose.port('80')}", figures)
    try:
        compose.down()  # what a killed run may have left
        built, seconds = compose.timed("build", timeout=900)
        cache = " (every layer from Docker's cache)" if _built_from_cache(built.stdout + built.stderr) else ""
        figures.note("build", "docker compose build", f"the Gear image, gear-examples{cache}", seconds)
        _, seconds = compose.timed("up", "-d", timeout=600)
        figures.note(
            "up",
            "docker compose up --build -d",
            "rabbitmq healthy (guest logged in over the network), then repo1-3, ctrl1-2 and web started",
            seconds,
        )
        first = wait_for(lambda: system.http("PUT", "/items/alice", "tea")[0] == 200, "WEB's first answer")
        figures.note(
            "first answer",
            "curl -X PUT localhost:18080/items/alice -d tea",
            "200 and the REPO instance that stored it, once the Gear services have connected",
            first,
        )
        began = time.monotonic()
        system.wait_for_statuses(lambda s: set(s) == INSTANCES, "every instance answers status")
        figures.note(
            "all instances",
            "curl localhost:18080/status",
            "all 6 instances answer (WEB's broadcast status)",
            first + time.monotonic() - began,
        )
        yield system
    finally:
        began = time.monotonic()
        compose.down()
        figures.note(
            "down", "docker compose down", "every container and the network removed", time.monotonic() - began
        )
        figures.write()


def test_point_to_point_stores_each_key_on_the_repo_its_ring_picks(system: System) -> None:
    for key, value in KEYS.items():
        began = time.monotonic()
        code, stored = system.http("PUT", f"/items/{key}", value)
        seconds = time.monotonic() - began
        assert code == 200, stored
        assert stored["host"] == RING.host_for(key), (key, stored)
    system.figures.note(
        "store",
        f"curl -X PUT localhost:18080/items/{key} -d {value}",
        f"{json.dumps(stored)} (WEB -> REPO.{stored['host']}, point-to-point)",
        seconds,
    )


def test_lookups_go_through_any_ctrl_to_the_owning_repo_within_the_deadline(system: System) -> None:
    ctrls = set()
    for key, value in KEYS.items():
        began = time.monotonic()
        code, found = system.http("GET", f"/items/{key}")
        seconds = time.monotonic() - began
        assert code == 200, found
        assert found["value"] == value
        assert found["repo_host"] == RING.host_for(key)
        assert 0 < found["budget_ms"] <= 5000, "CTRL's nested call inherits what is left of WEB's deadline"
        ctrls.add(found["ctrl_host"])
    assert ctrls == {"ctrl1", "ctrl2"}, "round-robin over the CTRL instances"
    system.figures.note(
        "read",
        f"curl localhost:18080/items/{key}",
        f"the value, found by CTRL.{found['ctrl_host']} on REPO.{found['repo_host']} (a nested call)",
        seconds,
    )


def test_multicast_reload_reaches_every_ctrl(system: System) -> None:
    code, _ = system.http("POST", "/reload", "7")
    assert code == 202
    statuses = system.wait_for_statuses(
        lambda s: all(s.get(c, {}).get("config_version") == 7 for c in ("CTRL.ctrl1", "CTRL.ctrl2")),
        "CTRL.* reloaded to version 7",
    )
    assert all(statuses[r]["config_version"] == 0 for r in ("REPO.repo1", "REPO.repo2", "REPO.repo3"))


def test_broadcast_refresh_reaches_every_instance_once(system: System) -> None:
    code, _ = system.http("POST", "/refresh")
    assert code == 202
    statuses = system.wait_for_statuses(
        lambda s: set(s) == INSTANCES and all(r["refreshes"] >= 1 for r in s.values()),
        "every instance refreshed",
    )
    assert {sender: r["refreshes"] for sender, r in statuses.items()} == dict.fromkeys(INSTANCES, 1)


def test_the_cli_service_lists_the_instances_and_gets_typed_errors(system: System) -> None:
    nodes, seconds = system.compose.timed("run", "--rm", "cli", "gear", "nodes", "--json", timeout=180)
    found = json.loads(nodes.stdout)["nodes"]
    listed = {node["instance"] for node in found}
    assert listed == INSTANCES, nodes.stdout
    brokers = sorted({str(node["info"].get("broker")) for node in found})
    system.figures.note(
        "gear nodes",
        "docker compose run --rm cli gear nodes",
        f"a table of the {len(listed)} live instances, each connected to {' and '.join(brokers)}",
        seconds,
    )
    payload = json.dumps({"key": "alice"})
    missing = system.compose.run(
        "run", "--rm", "cli", "gear", "call", "REPO.repo1", "delete", "-d", payload, timeout=180, check=False
    )
    assert missing.returncode == 7, missing.stdout + missing.stderr  # METHOD_NOT_FOUND
    unroutable = system.compose.run(
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


def test_gear_demo_passes_against_the_compose_rabbitmq(system: System) -> None:
    demo, seconds = system.compose.timed(
        "run", "--rm", "cli", "gear", "demo", "--url", "amqp://guest:guest@rabbitmq:5672/", timeout=300
    )
    last = demo.stdout.strip().splitlines()[-1]
    assert last.startswith("done: 27 checks passed"), demo.stdout[-2000:]
    system.figures.note(
        "gear demo",
        "docker compose run --rm cli gear demo --url amqp://guest:guest@rabbitmq:5672/",
        last.removeprefix("done: "),
        seconds,
    )


def test_the_health_check_fails_a_node_that_is_alone_where_three_are_wanted(system: System) -> None:
    alone = system.compose.run("exec", "-T", "rabbitmq", "bash", HEALTH, "3", check=False)
    assert alone.returncode == 1
    assert alone.stdout.strip() == "unhealthy: 1 cluster member(s), not 3", alone.stdout + alone.stderr


def test_the_health_check_fails_while_guest_may_log_in_from_localhost_only(system: System) -> None:
    """What the locally built image did before it set ``loopback_users.guest = false``: the port
    answered, so the old check passed, and every Gear service was refused."""

    def loopback_users(users: str) -> None:
        erlang = f"application:set_env(rabbit, loopback_users, [{users}])."
        system.compose.run("exec", "-T", "rabbitmq", "rabbitmqctl", "eval", erlang, timeout=120)

    loopback_users('<<"guest">>')
    try:
        refused = system.compose.run("exec", "-T", "rabbitmq", "bash", HEALTH, check=False)
    finally:
        loopback_users("")
    assert refused.returncode == 1
    assert refused.stdout.startswith("unhealthy: 403 ACCESS_REFUSED"), refused.stdout + refused.stderr
    assert system.compose.run("exec", "-T", "rabbitmq", "bash", HEALTH).stdout.startswith("healthy")


def test_a_killed_repo_fails_its_keys_inside_the_deadline_and_comes_back_empty(system: System) -> None:
    """REPO keeps its items in memory: a REPO container killed and started answers again, without them."""
    key = next(k for k in KEYS if RING.host_for(k) == "repo2")
    other = next(k for k in KEYS if RING.host_for(k) == "repo1")
    assert system.http("PUT", f"/items/{key}", "kept?")[0] == 200
    _, killed = system.compose.timed("kill", "repo2")
    system.figures.note(
        "kill a REPO", "docker compose kill repo2", "repo2 exits (SIGKILL); it stays down", killed
    )
    began = time.monotonic()
    code, answer = system.http("GET", f"/items/{key}")
    failed_after = time.monotonic() - began
    assert code == 502, answer  # a RemoteError from CTRL
    assert "CallTimeoutError" in answer["message"], answer
    system.figures.note(
        "its keys",
        f"curl localhost:18080/items/{key}",
        f"{code} {answer['error']}: {answer['message']}",
        failed_after,
    )
    began = time.monotonic()
    code, found = system.http("GET", f"/items/{other}")
    assert code == 200, found
    system.figures.note(
        "other keys",
        f"curl localhost:18080/items/{other}",
        f"200, from REPO.{found['repo_host']}",
        time.monotonic() - began,
    )
    _, started = system.compose.timed("start", "repo2")
    last: tuple[int, Any] = (0, None)

    def answers() -> bool:
        nonlocal last
        last = system.http("GET", f"/items/{key}")
        return last[0] == 200

    again = wait_for(answers, "repo2 answers again")
    found = last[1]
    assert found["repo_host"] == "repo2"
    assert found["value"] is None, "REPO keeps its items in memory: a new process starts empty"
    system.figures.note(
        "start it again",
        "docker compose start repo2",
        f"repo2 answers again {started + again:.1f} s after `start`; the value is gone (value null): "
        "REPO keeps its items in memory",
        started + again,
    )
    assert system.http("PUT", f"/items/{key}", "again")[0] == 200

"""docker-compose.yml's ``cluster`` profile run as a user runs it: ``up ha-web`` on compose's own network
starts three RabbitMQ nodes together, which cluster at boot, and once each is healthy (a Gear client logs
in over the network and the node counts three members) the example system on all three URLs with quorum
queues. While requests go through WEB without a pause, a node is drained, stopped and started (no
request may fail), another is stopped without a drain, and one is killed hard (``docker kill``): after
those two, the failed requests are counted, each must be a typed error from WEB, and the system must
answer again.

Compose v1 (``docker-compose``) runs it where installed (``test_compose_system.py`` uses v2). Figures of
each step go to ``compose-cluster.json`` (``tests/examples/compose_run.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.examples.compose_run import (
    Compose,
    Figures,
    Request,
    Traffic,
    compose_command,
    engine_or_skip,
    http,
    images_env,
    wait_for,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]

NODES = ("rabbit1", "rabbit2", "rabbit3")
INSTANCES = {"REPO.repo1", "REPO.repo2", "REPO.repo3", "CTRL.ctrl1", "CTRL.ctrl2", "WEB.web1"}
GEAR_SERVICES = ("ha-web", "ha-ctrl1", "ha-ctrl2", "ha-repo1", "ha-repo2", "ha-repo3")
PORT_PREFIX = "186"
"""Ports 186xx: away from the file's default (180xx) and from the single-node test's (185xx)."""
GUEST = "guest:guest"
FAILBACK_WAIT = 45.0
"""How long the traffic goes on after a node is back, for the instances that prefer it to move back
(they look every ``failback_interval``, 30 s); the figures say whether they did."""


@dataclass
class Cluster:
    """The running project, where WEB and the nodes' published ports are, and this run's figures."""

    compose: Compose
    figures: Figures

    @property
    def web(self) -> str:
        return f"http://127.0.0.1:{self.compose.port('81')}"

    def management(self, node: str, path: str) -> object:
        """GET the management API of ``node`` (1-3) through its published port, as guest."""
        url = f"http://127.0.0.1:{self.compose.port(f'1{node[-1]}')}/api/{path}"
        code, answer = http(url, user=GUEST)
        assert code == 200, (url, code, answer)
        return answer

    def brokers(self) -> dict[str, str]:
        """Which node each instance is connected to (``gear nodes`` from this machine, through rabbit1's
        published AMQP port: rabbit1 stays up in these tests)."""
        url = f"amqp://{GUEST}@127.0.0.1:{self.compose.port('01')}/"
        done = subprocess.run(
            [sys.executable, "-m", "gear.cli", "nodes", "--json", "--url", url],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            return {}
        nodes = json.loads(done.stdout)["nodes"]
        return {n["instance"]: str(n["info"].get("broker", "")).split("@")[-1].split(":")[0] for n in nodes}

    def off(self, node: str) -> bool:
        """Whether every instance is connected, and none to ``node``."""
        brokers = self.brokers()
        return set(brokers) == INSTANCES and node not in brokers.values()

    def statuses(self) -> set[str]:
        code, replies = http(f"{self.web}/status")
        return {r["sender"] for r in replies} if code == 200 and isinstance(replies, list) else set()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    engine_or_skip()
    name, command, version = compose_command("v1")
    env = images_env()
    figures = Figures(
        "cluster", compose=f"compose {name} {version}", rabbitmq_image=env.get("GEAR_RABBITMQ_IMAGE", "")
    )
    compose = Compose(
        command, project="gear-test-cluster", env=env, profiles=("cluster",), port_prefix=PORT_PREFIX
    )
    cluster = Cluster(compose, figures)
    try:
        compose.down()  # what a killed run may have left
        _, seconds = compose.timed("build", "ha-web", timeout=900)
        figures.note("build", "docker compose --profile cluster build ha-web", "the Gear image", seconds)
        _, seconds = compose.timed("up", "-d", "ha-web", timeout=600)
        figures.note(
            "up",
            "docker compose --profile cluster up --build -d ha-web",
            "rabbit1-3 start together and cluster; each is healthy once guest logs in over the network "
            "and it counts 3 members; then ha-repo1-3, ha-ctrl1-2 and ha-web start (nothing of the "
            "single-node system)",
            seconds,
        )
        first = wait_for(
            lambda: http(f"{cluster.web}/items/alice", "PUT", "tea")[0] == 200, "WEB's first answer"
        )
        figures.note(
            "first answer",
            "curl -X PUT localhost:18081/items/alice -d tea",
            "200, once the instances have connected and declared their quorum queues",
            first,
        )
        began = time.monotonic()
        wait_for(lambda: cluster.statuses() == INSTANCES, "every instance answers status", interval=0.5)
        figures.note(
            "all instances",
            "curl localhost:18081/status",
            "all 6 instances answer",
            first + time.monotonic() - began,
        )
        yield cluster
    finally:
        began = time.monotonic()
        compose.down()
        figures.note(
            "down",
            "docker compose --profile cluster down",
            "every container and the network removed",
            time.monotonic() - began,
        )
        figures.write()


def test_the_three_nodes_form_one_cluster(cluster: Cluster) -> None:
    for node in NODES:
        members = cluster.management(node, "nodes?columns=name,running")
        assert isinstance(members, list)
        assert {(m["name"], m["running"]) for m in members} == {(f"rabbit@{n}", True) for n in NODES}, node


def test_the_instances_use_quorum_queues(cluster: Cluster) -> None:
    queues = cluster.management("rabbit1", "queues?columns=name,type")
    assert isinstance(queues, list)
    types = {q["name"]: q["type"] for q in queues}
    gear_queues = {
        name: kind for name, kind in types.items() if name.split(".")[0] in ("REPO", "CTRL", "WEB")
    }
    assert {"REPO", "REPO.repo1", "CTRL", "CTRL.ctrl1", "WEB.web1"} <= set(gear_queues), sorted(types)
    assert set(gear_queues.values()) == {"quorum"}, gear_queues


def _wait_for_failback(cluster: Cluster, node: str) -> str:
    """Let the traffic run until an instance is connected to ``node`` again (bounded); says when."""
    try:
        waited = wait_for(
            lambda: node in cluster.brokers().values(), f"an instance back on {node}", FAILBACK_WAIT, 1
        )
    except AssertionError:
        return f"no instance moved back to {node} within {FAILBACK_WAIT:.0f} s"
    return f"instances moved back to {node} {waited:.0f} s after it was healthy (failback_interval 30 s)"


def _lost(failed: list[Request]) -> str:
    if not failed:
        return "no request failed"
    return f"{len(failed)} request(s) failed, each with a typed error within WEB's 5 s deadline"


def _check_failures(traffic: Traffic, disrupted_at: float, logs: str) -> None:
    """Every failed request was in flight around the disruption and got a typed error from WEB; the
    last twenty requests all succeeded (the system recovered)."""
    for request in traffic.failed():
        assert request.at >= disrupted_at - 5, f"a request failed before the disruption: {request}\n{logs}"
        assert request.status in (502, 503, 504), f"{request}\n{logs}"
        assert isinstance(request.answer, dict), request
        assert request.answer.get("error"), request
    assert all(r.status == 200 for r in traffic.requests[-20:]), f"{traffic.summary()}\n{logs}"


def test_a_drained_node_stopped_and_started_costs_no_request(cluster: Cluster) -> None:
    """``rabbitmq-upgrade drain`` first: the node hands its quorum queue leaders to the others and
    closes its clients' connections, so nothing waits for an election; every instance on it moves to
    another node and, after the start, back, and WEB answers every read and write meanwhile."""
    compose = cluster.compose
    began = time.time()
    with Traffic(cluster.web, read_key="alice").running() as traffic:
        wait_for(lambda: len(traffic.requests) >= 20, "traffic under way")
        _, drained = compose.timed("exec", "-T", "rabbit2", "rabbitmq-upgrade", "drain", timeout=180)
        moved = wait_for(lambda: cluster.off("rabbit2"), "every instance off rabbit2", 90, 1)
        _, stopped = compose.timed("stop", "rabbit2")
        nodes = compose.run("run", "--rm", "ha-cli", "gear", "nodes", "--json", timeout=180)
        listed = {n["instance"] for n in json.loads(nodes.stdout)["nodes"]}
        assert listed == INSTANCES, nodes.stdout
        assert not compose.running("rabbit2"), "ha-cli must not start the node that was stopped"
        _, started = compose.timed("start", "rabbit2")
        healthy = compose.wait_healthy("rabbit2")
        failback = _wait_for_failback(cluster, "rabbit2")
    cluster.figures.note(
        "drain a node",
        "docker compose --profile cluster exec rabbit2 rabbitmq-upgrade drain",
        f"rabbit2 hands its queue leaders over and closes its clients' connections; every instance that "
        f"was on it is on rabbit1 or rabbit3 {moved:.1f} s after `drain` returned",
        drained,
    )
    cluster.figures.note(
        "stop it",
        "docker compose --profile cluster stop rabbit2",
        "rabbit2 stops; `run --rm ha-cli gear nodes` lists all 6 instances and leaves rabbit2 stopped "
        "(ha-cli depends on nothing)",
        stopped,
    )
    cluster.figures.note(
        "start it again",
        "docker compose --profile cluster start rabbit2",
        f"rabbit2 rejoins (out of maintenance) and is healthy {started + healthy:.1f} s after `start`; "
        f"{failback}",
        started + healthy,
    )
    cluster.figures.note(
        "meanwhile",
        "curl localhost:18081/items/...",
        f"{traffic.summary()} over {traffic.requests[-1].at:.0f} s of drain, stop, start and failback",
        None,
    )
    failed = traffic.failed()
    assert failed == [], f"{traffic.summary()}\n{failed}\n{compose.logs(*GEAR_SERVICES, since=began)}"


def _disrupt(cluster: Cluster, verb: str, node: str) -> tuple[Traffic, float, float, float, float]:
    """``compose VERB NODE`` under traffic, then start it again; returns the traffic, when the
    disruption began (seconds into the traffic), how long until every instance was off the node,
    how long ``start`` took and how long until the node was healthy again."""
    compose = cluster.compose
    with Traffic(cluster.web, read_key="alice").running() as traffic:
        wait_for(lambda: len(traffic.requests) >= 20, "traffic under way")
        disrupted_at = traffic.elapsed
        _, took = compose.timed(verb, node)
        moved = wait_for(lambda: cluster.off(node), f"every instance off {node}", 90, 1)
        count = len(traffic.requests)
        wait_for(lambda: len(traffic.requests) >= count + 20, "traffic after the move")
        _, started = compose.timed("start", node)
        healthy = compose.wait_healthy(node)
        count = len(traffic.requests)
        wait_for(lambda: len(traffic.requests) >= count + 20, "traffic after the start")
    return traffic, disrupted_at, took + moved, started, healthy


def test_a_node_stopped_without_draining_fails_at_most_what_was_in_flight(cluster: Cluster) -> None:
    """A plain ``stop`` (SIGTERM): the node's queue leaders go with it and the two others elect new
    ones. Usually nothing fails; when an election outlasts a call's 5 s deadline (two voters can
    split their votes a few times on a busy machine), a request in flight gets a typed 504."""
    began = time.time()
    traffic, stopped_at, moved, started, healthy = _disrupt(cluster, "stop", "rabbit3")
    failed = traffic.failed()
    cluster.figures.note(
        "stop a node",
        "docker compose --profile cluster stop rabbit3",
        f"without a drain: {_lost(failed)}; every instance that was on rabbit3 is on another node "
        f"{moved:.1f} s after the stop",
        moved,
    )
    cluster.figures.note(
        "start it again",
        "docker compose --profile cluster start rabbit3",
        f"rabbit3 rejoins and is healthy {started + healthy:.1f} s after `start`",
        started + healthy,
    )
    cluster.figures.note(
        "meanwhile",
        "curl localhost:18081/items/...",
        f"{traffic.summary()} over {traffic.requests[-1].at:.0f} s of stop and start",
        None,
    )
    logs = cluster.compose.logs(*GEAR_SERVICES, since=began) if failed else ""
    _check_failures(traffic, stopped_at, logs)


def test_a_node_killed_hard_fails_at_most_what_was_in_flight(cluster: Cluster) -> None:
    """``docker kill``: no goodbye, the node's connections just die; requests in flight on them time out
    within WEB's deadline (a typed error each), the rest carry on over the other two nodes."""
    began = time.time()
    traffic, killed_at, moved, started, healthy = _disrupt(cluster, "kill", "rabbit2")
    failed = traffic.failed()
    cluster.figures.note(
        "kill a node",
        "docker compose --profile cluster kill rabbit2",
        f"rabbit2 dies at once (SIGKILL, as docker kill); {_lost(failed)}; every instance that was on it "
        f"is on another node {moved:.1f} s after the kill",
        moved,
    )
    cluster.figures.note(
        "start it again",
        "docker compose --profile cluster start rabbit2",
        f"rabbit2 rejoins and is healthy {started + healthy:.1f} s after `start`",
        started + healthy,
    )
    cluster.figures.note(
        "meanwhile",
        "curl localhost:18081/items/...",
        f"{traffic.summary()} over {traffic.requests[-1].at:.0f} s of kill and start",
        None,
    )
    logs = cluster.compose.logs(*GEAR_SERVICES, since=began) if failed else ""
    _check_failures(traffic, killed_at, logs)

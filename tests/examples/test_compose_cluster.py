"""docker-compose.yml's ``cluster`` profile: three clustered RabbitMQ nodes and the system on them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

import gear

ROOT = Path(__file__).resolve().parents[2]
NODES = ("rabbit1", "rabbit2", "rabbit3")
HEALTH_IN_NODE = "/usr/local/bin/gear-rabbitmq-health"
CONF_IN_NODE = "/etc/rabbitmq/conf.d/20-cluster.conf"


@pytest.fixture(scope="module")
def services() -> dict[str, dict[str, Any]]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data["services"]


def _in_profile(services: dict[str, dict[str, Any]], profile: str | None) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in services.items() if (s.get("profiles") or [None]) == [profile]}


def _conf_mount(spec: dict[str, Any]) -> Path:
    mounts = [v for v in spec["volumes"] if v.split(":")[1] == CONF_IN_NODE]
    assert len(mounts) == 1, spec["volumes"]
    source, _target, mode = mounts[0].split(":")
    assert mode == "ro"
    return ROOT / source


def test_three_rabbitmq_nodes_cluster_themselves_from_one_config(
    services: dict[str, dict[str, Any]],
) -> None:
    cluster = _in_profile(services, "cluster")
    assert set(NODES) <= set(cluster)
    cookies = {cluster[n]["environment"]["RABBITMQ_ERLANG_COOKIE"] for n in NODES}
    assert len(cookies) == 1, "the nodes need one shared Erlang cookie"
    confs = {_conf_mount(cluster[n]) for n in NODES}
    assert len(confs) == 1
    conf = dict(
        line.split(" = ", 1)
        for line in confs.pop().read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
    assert conf["cluster_formation.peer_discovery_backend"] == "classic_config"
    listed = {v for k, v in conf.items() if k.startswith("cluster_formation.classic_config.nodes.")}
    assert listed == {f"rabbit@{cluster[n]['hostname']}" for n in NODES}
    assert {cluster[n]["hostname"] for n in NODES} == set(NODES)
    for name in NODES:
        spec = cluster[name]
        assert spec["image"] == services["rabbitmq"]["image"], "the same RabbitMQ as the single node"
        # healthy: guest logs in over the network, and the node is one of a cluster of three
        assert spec["healthcheck"]["test"] == ["CMD", "bash", HEALTH_IN_NODE, str(len(NODES))]


def test_the_nodes_start_together_never_waiting_for_each_other(services: dict[str, dict[str, Any]]) -> None:
    """Each node waits in peer discovery for the others to answer: a node that waited for a healthy
    peer before starting would never let that peer become healthy (the deadlock of issue 41)."""
    for name in NODES:
        assert not set(services[name].get("depends_on") or ()) & set(NODES), name


def _instances(services: dict[str, dict[str, Any]], profile: str | None) -> dict[str, dict[str, Any]]:
    found = _in_profile(services, profile)
    return {n: s for n, s in found.items() if "GEAR_TYPE" in s.get("environment", {})}


def test_every_instance_has_a_cluster_twin_with_all_urls_and_quorum(
    services: dict[str, dict[str, Any]],
) -> None:
    single, ha = _instances(services, None), _instances(services, "cluster")

    def instance(spec: dict[str, Any]) -> tuple[str, str, tuple[str, ...]]:
        env = spec["environment"]
        return env["GEAR_TYPE"], env["GEAR_HOST"], tuple(spec["command"])

    assert sorted(map(instance, ha.values())) == sorted(map(instance, single.values()))
    node_hosts = {services[n]["hostname"] for n in NODES}
    for name, spec in ha.items():
        env = spec["environment"]
        settings = gear.Settings(url=env["GEAR_URL"], quorum=env["GEAR_QUORUM"])
        assert settings.quorum, name
        assert {urlsplit(u).hostname for u in settings.url} == node_hosts, name
        assert all(urlsplit(u).port == 5672 for u in settings.url), name
        assert {n for n, d in spec["depends_on"].items() if d["condition"] == "service_healthy"} == set(NODES)
        assert env.get("REPO_HOSTS") == single[name.removeprefix("ha-")]["environment"].get("REPO_HOSTS")


def test_naming_ha_web_starts_the_cluster_system_and_nothing_else(
    services: dict[str, dict[str, Any]],
) -> None:
    """``docker compose --profile cluster up ha-web`` is the one command: ha-web needs every other
    instance and node of the profile, and none of the single-node system."""
    cluster = _in_profile(services, "cluster")
    needed: set[str] = set()
    waiting = ["ha-web"]
    while waiting:
        for dependency in services[waiting.pop()].get("depends_on") or {}:
            if dependency not in needed:
                needed.add(dependency)
                waiting.append(dependency)
    assert needed == set(cluster) - {"ha-web"}


def test_the_cluster_cli_reaches_all_nodes_and_starts_nothing(services: dict[str, dict[str, Any]]) -> None:
    """``run --rm ha-cli gear nodes`` must not start a node that was stopped on purpose."""
    cli = services["ha-cli"]
    assert cli["profiles"] == ["tools"]
    assert not cli["depends_on"]
    settings = gear.Settings(url=cli["environment"]["GEAR_URL"], quorum=cli["environment"]["GEAR_QUORUM"])
    assert {urlsplit(u).hostname for u in settings.url} == set(NODES)


def test_no_two_services_publish_the_same_host_port(services: dict[str, dict[str, Any]]) -> None:
    published = [re.split(r":", port)[-2] for spec in services.values() for port in spec.get("ports", [])]
    assert len(published) == len(set(published)), sorted(published)

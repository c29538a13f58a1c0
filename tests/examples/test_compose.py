"""docker-compose.yml and the Dockerfile, read as files, and the compose file checked by compose v1 and v2.

The system they describe runs in containers in ``test_compose_system.py`` (one node) and
``test_compose_cluster_system.py`` (the ``cluster`` profile).
"""

from __future__ import annotations

import importlib
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gear.base.address import validate_host, validate_type
from tests.examples.compose_run import IMPLEMENTATIONS

ROOT = Path(__file__).resolve().parents[2]
HEALTH_SCRIPT = ROOT / "gear" / "examples" / "cluster" / "rabbitmq-health.sh"
HEALTH_IN_NODE = "/usr/local/bin/gear-rabbitmq-health"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def _gear_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: spec
        for name, spec in compose["services"].items()
        if "GEAR_TYPE" in (spec.get("environment") or {}) and not spec.get("profiles")
    }


def test_rabbitmq_has_management_and_a_login_healthcheck(compose: dict[str, Any]) -> None:
    rabbit = compose["services"]["rabbitmq"]
    assert re.fullmatch(r"\$\{GEAR_RABBITMQ_IMAGE:-rabbitmq:4-management\}", rabbit["image"])
    check = rabbit["healthcheck"]
    assert check["test"] == ["CMD", "bash", HEALTH_IN_NODE], "a login, not only an open port"
    assert f"./{HEALTH_SCRIPT.relative_to(ROOT)}:{HEALTH_IN_NODE}:ro" in rabbit["volumes"]
    assert check["retries"] >= 1
    assert rabbit["hostname"] == "rabbitmq", "the node is rabbit@rabbitmq, whatever the image"


def expand(text: str, env: dict[str, str] | None = None) -> str:
    """``${NAME:-default}`` as compose substitutes it (``env`` or the default)."""
    return re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: (env or {}).get(m.group(1), m.group(2)), text)


def published(compose: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, tuple[str, int]]:
    """Every published port as ``"service:container-port" -> (host address, host port)``."""
    found = {}
    for name, spec in compose["services"].items():
        for port in spec.get("ports", []):
            address, host, container = expand(port, env).split(":")
            found[f"{name}:{container}"] = (address, int(host))
    return found


def test_ports_are_published_on_loopback_away_from_a_hosts_rabbitmq(compose: dict[str, Any]) -> None:
    ports = published(compose)
    assert {address for address, _ in ports.values()} == {"127.0.0.1"}
    numbers = [port for _, port in ports.values()]
    assert len(numbers) == len(set(numbers)), sorted(numbers)
    taken = {5672, 15672, 25672, 4369, 8080, 5701, 5702, 5703, 15701, 15702, 15703}  # RabbitMQ, its
    assert not taken & set(numbers)  # management, epmd, distribution, scripts/rabbitmq-cluster's nodes
    assert ports["web:8080"] == ("127.0.0.1", 18080)
    assert ports["rabbitmq:5672"] == ("127.0.0.1", 18072)


def test_one_variable_moves_every_published_port(compose: dict[str, Any]) -> None:
    default, moved = published(compose), published(compose, {"GEAR_PORT_PREFIX": "190"})
    assert set(moved) == set(default)
    assert {name: port - 1000 for name, (_, port) in moved.items()} == {
        name: port for name, (_, port) in default.items()
    }


def test_several_instances_per_type_each_with_its_own_type_and_host(compose: dict[str, Any]) -> None:
    services = _gear_services(compose)
    pairs = [(s["environment"]["GEAR_TYPE"], s["environment"]["GEAR_HOST"]) for s in services.values()]
    for type_, host in pairs:
        validate_type(type_)
        validate_host(host)
    assert len(pairs) == len(set(pairs)), "two instances share a TYPE.HOST"
    counts = {t: sum(1 for p in pairs if p[0] == t) for t in ("REPO", "CTRL", "WEB")}
    assert counts["REPO"] >= 2
    assert counts["CTRL"] >= 2
    assert counts["WEB"] >= 1


def test_services_wait_for_a_healthy_broker_and_point_at_it(compose: dict[str, Any]) -> None:
    for name, spec in _gear_services(compose).items():
        assert spec["depends_on"]["rabbitmq"]["condition"] == "service_healthy", name
        assert spec["build"]["context"] == ".", name
        assert spec["image"] == "gear-examples", "one image, built once, for every Gear service"
        url = spec["environment"]["GEAR_URL"]
        assert re.fullmatch(r"amqp://guest:guest@rabbitmq:5672/", url), (name, url)


def test_the_base_image_defaults_to_the_dockerfiles(compose: dict[str, Any]) -> None:
    dockerfile_default = (ROOT / "Dockerfile").read_text().split("ARG BASE_IMAGE=", 1)[1].split()[0]
    for spec in _gear_services(compose).values():
        assert expand(spec["build"]["args"]["BASE_IMAGE"]) == dockerfile_default


def test_web_names_what_it_needs_so_that_naming_it_starts_the_system(compose: dict[str, Any]) -> None:
    services = _gear_services(compose)
    others = {name for name, spec in services.items() if spec["environment"]["GEAR_TYPE"] != "WEB"}
    assert set(services["web"]["depends_on"]) == {"rabbitmq", *others}


def test_ring_names_the_repo_instances_that_exist(compose: dict[str, Any]) -> None:
    services = _gear_services(compose)
    repo_hosts = {
        s["environment"]["GEAR_HOST"] for s in services.values() if s["environment"]["GEAR_TYPE"] == "REPO"
    }
    for spec in services.values():
        ring = spec["environment"].get("REPO_HOSTS")
        if ring is not None:
            assert set(ring.split(",")) == repo_hosts


def _target(command: list[str]) -> str | None:
    if command[:2] == ["gear", "serve"]:
        return command[2]
    if command[:2] == ["python", "-m"]:
        return command[2]
    return None


def test_every_command_names_something_importable(compose: dict[str, Any]) -> None:
    for name, spec in _gear_services(compose).items():
        command = spec["command"]
        assert isinstance(command, list), f"{name}: use the exec form"
        target = _target(command)
        assert target is not None, f"{name}: unexpected command {shlex.join(command)}"
        module_name, _, attr = target.partition(":")
        module = importlib.import_module(module_name)
        if attr:
            assert callable(getattr(module, attr)), name


def test_cli_service_is_a_tool_that_up_does_not_start(compose: dict[str, Any]) -> None:
    cli = compose["services"]["cli"]
    assert cli["profiles"] == ["tools"]
    assert cli["command"][0] == "gear"
    assert cli["depends_on"]["rabbitmq"]["condition"] == "service_healthy"
    assert cli["environment"]["GEAR_URL"] == "amqp://guest:guest@rabbitmq:5672/"


def test_dockerfile_copies_what_exists_and_installs_the_cli() -> None:
    lines = [
        line.strip()
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    # The base is a build argument (a Debian-built one where no registry is reachable); the default is
    # the official slim Python image.
    assert re.fullmatch(r"ARG BASE_IMAGE=python:3\.1[1-9](-slim)?", lines[0])
    assert lines[1] == "FROM ${BASE_IMAGE}"
    copied = []
    for line in lines:
        if line.startswith("COPY "):
            *sources, _dest = line.split()[1:]
            copied += sources
    for source in copied:
        assert (ROOT / source).exists(), f"COPY {source}: no such path"
    assert {"pyproject.toml", "README.md", "gear"} <= set(copied)  # gear.cli, gear.examples inside
    text = "\n".join(lines)
    assert re.search(r'^RUN .*pip install (\.|"\.\[metrics\]")', text, re.M), "the image installs Gear"
    assert re.search(r"^USER \S+", text, re.M), "the services should not run as root"
    assert lines[-1].startswith("CMD [")


def test_dockerignore_keeps_what_the_image_needs() -> None:
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert not ignored & {"gear", "pyproject.toml", "README.md"}
    assert ".git" in ignored


def compose_implementations() -> dict[str, list[str]]:
    """The compose implementations on this machine: ``{"v2": ["docker", "compose"], "v1": [...]}``."""
    found: dict[str, list[str]] = {}
    for name, command in IMPLEMENTATIONS.items():
        if shutil.which(command[0]) is None:
            continue
        done = subprocess.run(
            [*command, "version", "--short"], capture_output=True, text=True, timeout=60, check=False
        )
        if done.returncode == 0 and done.stdout.strip()[:1].isdigit():
            found[name] = command
    return found


@pytest.mark.parametrize("implementation", ["v2", "v1"])
@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        ((), {"rabbitmq", "repo1", "repo2", "repo3", "ctrl1", "ctrl2", "web"}),
        (("--profile", "cluster"), {"rabbit1", "rabbit2", "rabbit3", "ha-web", "ha-repo1", "ha-ctrl1"}),
    ],
)
def test_compose_v1_and_v2_accept_the_file(
    implementation: str, profile: tuple[str, ...], expected: set[str]
) -> None:
    """A real compose implementation parses and validates it (no engine needed); the header promises
    both compose v2 (``docker compose``) and v1.29 (``docker-compose``)."""
    command = compose_implementations().get(implementation)
    if command is None:
        pytest.skip(f"no compose {implementation}: scripts/docker_engine.py start installs both")
    done = subprocess.run(
        [*command, "-f", str(ROOT / "docker-compose.yml"), *profile, "config", "--services"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert expected <= set(done.stdout.split())

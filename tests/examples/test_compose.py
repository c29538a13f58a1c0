"""docker-compose.yml and the Dockerfile, read as files, and the compose file checked by docker-compose.

The system they describe runs in containers in ``test_compose_system.py``.
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

from gear.address import validate_host, validate_type

ROOT = Path(__file__).resolve().parents[2]


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


def test_rabbitmq_has_management_and_a_healthcheck(compose: dict[str, Any]) -> None:
    rabbit = compose["services"]["rabbitmq"]
    assert "management" in rabbit["image"]
    check = rabbit["healthcheck"]
    assert check["test"][0] in ("CMD", "CMD-SHELL")
    assert "rabbitmq-diagnostics" in " ".join(check["test"][1:])
    assert check["retries"] >= 1
    assert {"5672:5672", "15672:15672"} <= set(rabbit["ports"])


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
        assert spec["build"] == ".", name
        url = spec["environment"]["GEAR_URL"]
        assert re.fullmatch(r"amqp://guest:guest@rabbitmq:5672/", url), (name, url)


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


@pytest.mark.docker
def test_docker_compose_accepts_the_file() -> None:
    """A real compose implementation (Debian's docker-compose) parses and validates it; no engine needed."""
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.skip("no docker-compose: scripts/docker_engine.py start installs Debian's")
    done = subprocess.run(
        [compose, "-f", str(ROOT / "docker-compose.yml"), "config", "--services"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert {"rabbitmq", "repo1", "repo2", "repo3", "ctrl1", "ctrl2", "web"} <= set(done.stdout.split())

"""Running docker-compose.yml as a user does, for the tests: the file as it is, on compose's own network.

The only things a test sets are the ones the file reads from the environment (``GEAR_PORT_PREFIX``,
``GEAR_RABBITMQ_IMAGE``, ``GEAR_BASE_IMAGE``) and a project name of its own (``gear-test-*``, which
``scripts/docker_engine.py stop`` takes down if a killed run left it behind). Requests go to WEB's
published port on 127.0.0.1, commands through compose's own ``run``, ``kill``, ``stop`` and ``start``.

What each step took is noted (:class:`Figures`) and written to ``$GEAR_TEST_ARTIFACTS`` (default
``test-artifacts/``) as ``compose-NAME.json``; ``scripts/compose_figures.py --write-docs`` puts those
figures into docs/guides/example-system.md, and the suite's summary prints them.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

__all__ = (
    "IMPLEMENTATIONS",
    "ROOT",
    "Compose",
    "Figures",
    "Request",
    "Traffic",
    "compose_command",
    "engine_or_skip",
    "images_env",
)

ROOT = Path(__file__).resolve().parents[2]
ENV_BASE_IMAGE = "GEAR_TEST_BASE_IMAGE"
ENV_RABBITMQ_IMAGE = "GEAR_TEST_RABBITMQ_IMAGE"
IMPLEMENTATIONS = {"v2": ["docker", "compose"], "v1": ["docker-compose"]}
WAIT = 180.0
"""The longest any wait in these tests lasts (a step that takes longer has failed)."""


def compose_command(prefer: str) -> tuple[str, list[str], str]:
    """The compose implementation to run (``prefer``: ``"v2"`` or ``"v1"``, else the other one):
    its name, its command and its version. Skips the test if neither is installed."""
    for name in (prefer, *(n for n in IMPLEMENTATIONS if n != prefer)):
        command = IMPLEMENTATIONS[name]
        if shutil.which(command[0]) is None:
            continue
        done = subprocess.run(
            [*command, "version", "--short"], capture_output=True, text=True, timeout=60, check=False
        )
        if done.returncode == 0 and done.stdout.strip()[:1].isdigit():
            return name, command, done.stdout.strip()
    pytest.skip("no compose (v1 or v2): scripts/docker_engine.py start installs both")


def engine_or_skip() -> None:
    """Skip unless a Docker engine answers."""
    done = subprocess.run(["docker", "version"], capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        pytest.skip(f"no Docker engine answers (scripts/docker_engine.py start): {done.stderr.strip()[:200]}")


def images_env() -> dict[str, str]:
    """The images the file is to use: the local ones of ``scripts/debian_images.py`` when
    ``scripts/docker_engine.py run --images`` named them, else the file's defaults (a registry)."""
    env = {}
    if image := os.environ.get(ENV_RABBITMQ_IMAGE):
        env["GEAR_RABBITMQ_IMAGE"] = image
    if image := os.environ.get(ENV_BASE_IMAGE):
        env["GEAR_BASE_IMAGE"] = image
    return env


@dataclass
class Figures:
    """What each step of a run took and showed, for the docs (``scripts/compose_figures.py``)."""

    name: str
    """``single`` or ``cluster``: the file is ``compose-NAME.json``."""
    compose: str = ""
    rabbitmq_image: str = ""
    steps: list[dict[str, Any]] = field(default_factory=list)

    def note(self, step: str, command: str, seen: str, seconds: float | None) -> None:
        """One step: what a user types, what they see, and how long it took."""
        self.steps.append(
            {
                "step": step,
                "command": command,
                "seen": seen,
                "seconds": None if seconds is None else round(seconds, 3),
            }
        )

    def write(self) -> Path:
        """Write the figures to ``$GEAR_TEST_ARTIFACTS/compose-NAME.json``; returns the path."""
        directory = Path(os.environ.get("GEAR_TEST_ARTIFACTS", "test-artifacts"))
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"compose-{self.name}.json"
        record = {
            "name": self.name,
            "compose": self.compose,
            "rabbitmq_image": self.rabbitmq_image,
            "cpus": os.cpu_count(),
            "load": [round(x, 2) for x in os.getloadavg()],
            "written": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "steps": self.steps,
        }
        path.write_text(json.dumps(record, indent=2) + "\n")
        return path


@dataclass
class Compose:
    """One compose project of docker-compose.yml, run with ``command`` (v1 or v2)."""

    command: list[str]
    project: str
    env: dict[str, str]
    profiles: tuple[str, ...] = ()
    port_prefix: str = "185"

    def run(self, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``compose -p PROJECT [--profile P] ARGS`` in the checkout; a failure fails the test (``check``)."""
        profiles = [arg for profile in self.profiles for arg in ("--profile", profile)]
        done = subprocess.run(
            [*self.command, "-p", self.project, *profiles, *args],
            cwd=ROOT,
            env={**os.environ, **self.env, "GEAR_PORT_PREFIX": self.port_prefix},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"compose {' '.join(args)}: exit {done.returncode}\n{done.stderr[-3000:]}")
        return done

    def timed(self, *args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], float]:
        """:meth:`run`, and how many seconds it took."""
        began = time.monotonic()
        done = self.run(*args, timeout=timeout)
        return done, time.monotonic() - began

    def port(self, suffix: str) -> int:
        """The host port the file publishes as ``${GEAR_PORT_PREFIX}SUFFIX``."""
        return int(self.port_prefix + suffix)

    def container(self, service: str) -> str:
        """The id of ``service``'s container (running or not)."""
        ids = self.run("ps", "-a", "-q", service).stdout.split()
        assert len(ids) == 1, (service, ids)
        return ids[0]

    def running(self, service: str) -> bool:
        """Whether ``service``'s container runs."""
        done = subprocess.run(
            ["docker", "inspect", "--format", "{{.State.Running}}", self.container(service)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return done.stdout.strip() == "true"

    def health(self, service: str) -> str:
        """Docker's health status of ``service``'s container (``healthy``, ``starting``, ...)."""
        done = subprocess.run(
            ["docker", "inspect", "--format", "{{.State.Health.Status}}", self.container(service)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return done.stdout.strip() or done.stderr.strip()

    def wait_healthy(self, service: str) -> float:
        """Wait (bounded) until ``service`` is healthy; returns how long that took."""
        return wait_for(lambda: self.health(service) == "healthy", f"{service} healthy", interval=0.5)

    def logs(self, *services: str, since: float) -> str:
        """The services' log lines stamped at or after ``since`` (unix seconds), for a failure's message."""
        done = self.run("logs", "--no-color", "--timestamps", *services, timeout=120, check=False)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(since))
        kept = [line for line in done.stdout.splitlines() if line.partition("| ")[2][:19] >= stamp]
        return "\n".join(kept[-400:])

    def down(self) -> None:
        """Remove the project's containers, networks and volumes, whatever state they are in."""
        self.run("down", "--volumes", "--remove-orphans", "--timeout", "10", timeout=300, check=False)


def wait_for(
    condition: Callable[[], bool], what: str, timeout: float = WAIT, interval: float = 0.25
) -> float:
    """Wait until ``condition()`` holds (at most ``timeout`` seconds); returns how long it took.

    Raises:
        AssertionError: if it never held in time.
    """
    began = time.monotonic()
    while not condition():
        if time.monotonic() - began > timeout:
            raise AssertionError(f"{what}: not within {timeout:.0f} s")
        time.sleep(interval)
    return time.monotonic() - began


def http(
    url: str, method: str = "GET", body: str | None = None, timeout: float = 30, user: str | None = None
) -> tuple[int, Any]:
    """One HTTP request (with ``user`` ``NAME:PASSWORD``, basic authentication); returns the status and
    the decoded JSON (status 0 and the error if no answer came)."""
    request = urllib.request.Request(url, data=body.encode() if body is not None else None, method=method)
    if user is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(user.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read())
        except ValueError:
            return exc.code, None
    except (OSError, ValueError) as exc:
        return 0, repr(exc)


@dataclass(frozen=True, slots=True)
class Request:
    """One request of :class:`Traffic`: when it started (seconds into the traffic), what, how it went."""

    at: float
    what: str
    status: int
    seconds: float
    answer: Any


class Traffic:
    """Reads and writes through WEB, one after the other, from a thread, while a test disturbs the system.

    Every request is kept; :meth:`failed` are those without a 200.
    """

    def __init__(self, web: str, read_key: str, pause: float = 0.1, limit: int = 5000) -> None:
        self.web, self.read_key, self.pause, self.limit = web, read_key, pause, limit
        self.requests: list[Request] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="compose-traffic", daemon=True)
        self._began = 0.0

    def _loop(self) -> None:
        for n in range(self.limit):
            if self._stop.is_set():
                return
            if n % 2:
                what, method, path, body = "read", "GET", f"/items/{self.read_key}", None
            else:
                what, method, path, body = "write", "PUT", f"/items/traffic-{n}", f"value {n}"
            began = time.monotonic()
            status, answer = http(f"{self.web}{path}", method, body)
            self.requests.append(Request(began - self._began, what, status, time.monotonic() - began, answer))
            self._stop.wait(self.pause)

    @property
    def elapsed(self) -> float:
        """Seconds since the traffic started."""
        return time.monotonic() - self._began

    @contextmanager
    def running(self) -> Iterator[Traffic]:
        """Send requests while the block runs (and until the one in flight ends)."""
        self._began = time.monotonic()
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(timeout=60)

    def failed(self) -> list[Request]:
        return [r for r in self.requests if r.status != 200]

    def slowest(self) -> Request:
        return max(self.requests, key=lambda r: r.seconds)

    def summary(self) -> str:
        """``N requests (R reads, W writes), F failed, slowest S s``."""
        reads = sum(1 for r in self.requests if r.what == "read")
        failed = self.failed()
        codes = sorted({r.status for r in failed})
        failures = f"{len(failed)} failed" + (f" ({', '.join(map(str, codes))})" if failed else "")
        return (
            f"{len(self.requests)} requests ({reads} reads, {len(self.requests) - reads} writes), "
            f"{failures}, slowest {self.slowest().seconds:.2f} s"
        )

#!/usr/bin/env python3
"""Make a Docker engine available where none runs, and stop it afterwards if this script started it.

If an engine already answers, it is used as it is. Otherwise (as root) Debian's ``docker.io`` and
``docker-compose`` (compose v1) are installed if missing, and compose v2 (``docker compose``, from
Debian trixie's package: ``scripts/_compose_v2.py``) if the docker CLI lacks it, and ``dockerd`` is
started as users run it: with its default bridge, so that compose's own networks work (iptables rules
and NAT for the bridges, IPv4 forwarding), overlay2 storage and the cgroupfs driver. Host-network
containers (``tests/rabbitmq_container.py``) work on it too::

    python3 scripts/docker_engine.py start     # an engine answers afterwards; says if it started one
    python3 scripts/docker_engine.py stop      # stops it only if `start` started it
    python3 scripts/docker_engine.py status
    python3 scripts/docker_engine.py run [--images [--rabbitmq 4.3]] [--skip-unavailable] -- COMMAND...
    python3 scripts/docker_engine.py run --unavailable-exit 75 -- COMMAND...   # 75 where Docker cannot run

``run`` starts the engine, with ``--images`` builds (or reuses) the local images of
``scripts/debian_images.py`` (RabbitMQ ``--rabbitmq``: 3.10, 4.0 or 4.3, the default) and passes their
names to COMMAND in ``GEAR_TEST_RABBITMQ_IMAGE`` and ``GEAR_TEST_BASE_IMAGE``, runs COMMAND, and stops
the engine if it started it. With ``--skip-unavailable`` a machine where Docker cannot run is a skip
(exit 0, with the reason), not a failure; ``--unavailable-exit N`` exits with N there instead, so that a
caller can run something else. Every step says what it does and how long it took, on stderr.

``stop`` cleans up strictly: it removes what the tests left (containers labelled ``gear.test``, compose
projects named ``gear-test-*`` with their networks and volumes), stops dockerd, then undoes what dockerd
changed on the host and leaves behind (``scripts/_docker_network.py``): its iptables rules and chains
(only docker's; other rules stay), its bridge links, the forwarding switch and the FORWARD policy.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from _docker_network import note_host, undo_docker_changes
from _steps import StepError, apt_install, say, step

__all__ = ("engine_version", "ensure_engine", "stop_engine")

PREFIX = "docker-engine"
STATE_DIR = Path("/run/gear-docker-engine")
PIDFILE = STATE_DIR / "dockerd.pid"
LOGFILE = Path("/var/log/gear-dockerd.log")
NETWORK_NOTE = STATE_DIR / "host-network.json"
"""The host's forwarding switch and FORWARD policy before dockerd started (``_docker_network.py``)."""
TEST_LABEL = "gear.test"
"""Containers the tests start carry this label; ``stop`` removes any that a killed run left behind."""
TEST_PROJECT_PREFIX = "gear-test-"
"""Compose projects the tests bring up are named so; ``stop`` takes down any that a killed run left."""
COMPOSE_PROJECT_LABEL = "com.docker.compose.project"
START_TIMEOUT = 60.0

DOCKERD_ARGS = (
    "--ip6tables=false",
    "--exec-opt=native.cgroupdriver=cgroupfs",
)
"""Bridge, iptables, IPv4 forwarding and masquerading keep dockerd's defaults (on): compose's default
network is a bridge, and its containers reach each other by service name and the host's published
ports through it."""


class EngineUnavailableError(StepError):
    """Docker cannot run on this machine (the reason says why); callers may treat it as a skip."""


def engine_version() -> str | None:
    """The engine's version if one answers, else None."""
    try:
        done = subprocess.run(
            ["docker", "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def _our_pid() -> int | None:
    """The pid of the dockerd this script started, if it still runs."""
    try:
        pid = int(PIDFILE.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except (OSError, ValueError):
        return None
    return pid if cmdline.endswith(b"dockerd") else None


def ensure_engine() -> bool:
    """Make an engine answer; True if this call started it.

    Raises:
        EngineUnavailableError: where Docker cannot run (not root, no apt, dockerd does not come up).
        StepError: if installing the packages fails.
    """
    if version := engine_version():
        how = "started by this script earlier" if _our_pid() else "not started by this script"
        say(PREFIX, f"an engine answers already (Docker {version}, {how}); using it as it is")
        return False
    if os.environ.get("DOCKER_HOST"):
        raise EngineUnavailableError(f"DOCKER_HOST={os.environ['DOCKER_HOST']} does not answer")
    if os.geteuid() != 0:
        raise EngineUnavailableError("no Docker engine answers, and starting dockerd needs root")
    needed = (
        ("docker.io", "dockerd"),
        ("docker.io", "docker"),
        ("iptables", "iptables"),
        ("docker-compose", "docker-compose"),
    )
    missing = sorted({package for package, command in needed if shutil.which(command) is None})
    if missing:
        try:
            apt_install(PREFIX, missing)
        except StepError as exc:
            raise EngineUnavailableError(str(exc)) from exc
    _ensure_compose_v2()
    storage = _storage_driver()
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    note_host(NETWORK_NOTE)
    with step(PREFIX, f"start dockerd ({storage}, default bridge with iptables NAT; log {LOGFILE})"):
        log = LOGFILE.open("ab")
        daemon = subprocess.Popen(
            ["dockerd", f"--storage-driver={storage}", *DOCKERD_ARGS],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # not killed with the terminal or CI step that started it
        )
        log.close()
        PIDFILE.write_text(f"{daemon.pid}\n")
        deadline = time.monotonic() + START_TIMEOUT
        while (version := engine_version()) is None:
            if daemon.poll() is not None or time.monotonic() > deadline:
                _terminate(daemon.pid)
                PIDFILE.unlink(missing_ok=True)
                _undo_network()
                tail = "\n".join(LOGFILE.read_text(errors="replace").splitlines()[-10:])
                raise EngineUnavailableError(f"dockerd did not come up (exit {daemon.poll()}):\n{tail}")
            time.sleep(0.5)
    say(PREFIX, f"Docker {version} answers (pid {daemon.pid}, started by this script)")
    return True


def _ensure_compose_v2() -> None:
    """Compose v2 beside v1 where it can be had; a machine without it still runs compose v1."""
    from _compose_v2 import ensure_compose_v2
    from debian_images import debian_mirror

    try:
        ensure_compose_v2(PREFIX, debian_mirror())
    except StepError as exc:
        say(PREFIX, f"no compose v2 (`docker compose`); compose v1 (`docker-compose`) only: {exc}")


def _storage_driver() -> str:
    filesystems = Path("/proc/filesystems").read_text()
    return "overlay2" if "\toverlay\n" in filesystems else "vfs"


def stop_engine() -> bool:
    """Stop the dockerd this script started (after removing the tests' leftover containers).

    Returns True if it stopped one; an engine started by someone else is left alone.
    """
    pid = _our_pid()
    if pid is None:
        PIDFILE.unlink(missing_ok=True)
        say(PREFIX, "no dockerd started by this script is running; nothing to stop")
        if NETWORK_NOTE.exists() and engine_version() is None:
            _undo_network()  # ours died without a stop: its host changes are still there
        return False
    _remove_test_leftovers()
    with step(PREFIX, f"stop dockerd (pid {pid})"):
        _terminate(pid)
    PIDFILE.unlink(missing_ok=True)
    _undo_network()
    return True


def _docker_lines(*args: str) -> list[str]:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=60, check=False)
    return done.stdout.split() if done.returncode == 0 else []


def _remove_test_leftovers() -> None:
    """Remove the containers, networks and volumes that test runs left (a killed run, a failed cleanup)."""
    containers = set(_docker_lines("ps", "-aq", "--filter", f"label={TEST_LABEL}"))
    projects = {
        project
        for project in _docker_lines(
            "ps",
            "-a",
            "--filter",
            f"label={COMPOSE_PROJECT_LABEL}",
            "--format",
            f'{{{{.Label "{COMPOSE_PROJECT_LABEL}"}}}}',
        )
        if project.startswith(TEST_PROJECT_PREFIX)
    }
    for project in sorted(projects):
        containers.update(_docker_lines("ps", "-aq", "--filter", f"label={COMPOSE_PROJECT_LABEL}={project}"))
    if containers:
        say(PREFIX, f"removing {len(containers)} container(s) a test run left behind")
        subprocess.run(
            ["docker", "rm", "-f", "-v", *sorted(containers)], capture_output=True, timeout=300, check=False
        )
    networks = [
        name
        for name in _docker_lines("network", "ls", "--format", "{{.Name}}")
        if name.startswith(TEST_PROJECT_PREFIX)
    ]
    volumes = [
        name
        for name in _docker_lines("volume", "ls", "--format", "{{.Name}}")
        if name.startswith(TEST_PROJECT_PREFIX)
    ]
    if networks:
        say(PREFIX, f"removing network(s) a test run left behind: {', '.join(networks)}")
        subprocess.run(["docker", "network", "rm", *networks], capture_output=True, timeout=120, check=False)
    if volumes:
        say(PREFIX, f"removing {len(volumes)} volume(s) a test run left behind")
        subprocess.run(["docker", "volume", "rm", *volumes], capture_output=True, timeout=120, check=False)


def _undo_network() -> None:
    """Undo what the dockerd this script ran changed on the host (it has exited)."""
    undone = undo_docker_changes(NETWORK_NOTE)
    if undone:
        say(PREFIX, f"undid dockerd's host changes: {'; '.join(undone)}")


def _terminate(pid: int, grace: float = 30.0) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):  # reap it if it is our child
            os.waitpid(pid, os.WNOHANG)
        if not Path(f"/proc/{pid}").exists() or _is_zombie(pid):
            return
        time.sleep(0.2)
    say(PREFIX, f"dockerd (pid {pid}) ignored SIGTERM for {grace:.0f} s; killing it")
    os.kill(pid, signal.SIGKILL)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True


def _run_with_engine(command: list[str], images: str | None, unavailable_exit: int | None) -> int:
    began = time.monotonic()
    try:
        return _run_steps(command, images, unavailable_exit)
    except StepError as exc:
        say(PREFIX, f"error: {exc}")
        return 1
    finally:
        say(PREFIX, f"run: {time.monotonic() - began:.1f} s in all (engine, images, command, stop)")


def _run_steps(command: list[str], images: str | None, unavailable_exit: int | None) -> int:
    """``images``: the RabbitMQ release whose local images to build or reuse, or None for none;
    ``unavailable_exit``: the exit code where Docker cannot run (None: that is an error)."""
    try:
        started = ensure_engine()
    except EngineUnavailableError as exc:
        if unavailable_exit is None:
            raise
        say(PREFIX, f"SKIPPED: Docker cannot run here: {exc}")
        return unavailable_exit
    try:
        env = dict(os.environ)
        if images is not None:
            from debian_images import ensure_images

            built = ensure_images(images)
            env.update(built.env())
            for key, value in built.env().items():
                say(PREFIX, f"{key}={value}")
        say(PREFIX, f"running: {shlex.join(command)}")
        started_command = time.monotonic()
        code = subprocess.call(command, env=env)
        say(PREFIX, f"command exited with {code} after {time.monotonic() - started_command:.1f} s")
        return code
    finally:
        if started:
            stop_engine()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("start", help="make an engine answer")
    sub.add_parser("stop", help="stop the engine if `start` started it")
    sub.add_parser("status", help="say whether an engine answers and who started it")
    runner = sub.add_parser("run", help="start, run COMMAND, stop")
    runner.add_argument("--images", action="store_true", help="build or reuse the local images first")
    runner.add_argument(
        "--rabbitmq", default="4.3", help="the RabbitMQ release of the --images image (3.10, 4.0, 4.3)"
    )
    runner.add_argument("--skip-unavailable", action="store_true", help="exit 0 where Docker cannot run")
    runner.add_argument("--unavailable-exit", type=int, metavar="N", help="exit N where Docker cannot run")
    runner.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    try:
        if args.action == "start":
            ensure_engine()
        elif args.action == "stop":
            stop_engine()
        elif args.action == "status":
            version = engine_version()
            owner = f"pid {pid}, started by this script" if (pid := _our_pid()) else "not ours"
            say(PREFIX, f"Docker {version} answers ({owner})" if version else "no engine answers")
            return 0 if version else 1
        else:
            command = args.command[1:] if args.command[:1] == ["--"] else args.command
            if not command:
                parser.error("run needs a COMMAND after --")
            images = args.rabbitmq if args.images else None
            unavailable = 0 if args.skip_unavailable else args.unavailable_exit
            return _run_with_engine(command, images, unavailable)
    except StepError as exc:
        say(PREFIX, f"error: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

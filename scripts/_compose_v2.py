"""Compose v2 (``docker compose``) from Debian's own package, for a machine whose release has only v1.

Debian 12 (bookworm) packages compose v1 (``docker-compose`` 1.29, Python); Debian 13 (trixie) packages
compose v2 (``docker-compose`` 2.26, one Go binary that needs only libc, installed as a docker CLI
plugin). Both packages are called ``docker-compose``, so the trixie one cannot be installed beside v1 with
apt: :func:`ensure_compose_v2` downloads it with apt (a sources list and lists of its own under
:data:`CACHE`, so the machine's apt configuration is untouched) and puts its plugin where every docker
CLI looks for plugins (:data:`PLUGIN`). Standard library only.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from _steps import StepError, run, say, step

__all__ = ("CACHE", "PLUGIN", "SUITE", "compose_v2_version", "ensure_compose_v2")

SUITE = "trixie"
"""The Debian release whose ``docker-compose`` package is compose v2."""
PLUGIN = Path("/usr/local/lib/docker/cli-plugins/docker-compose")
PLUGIN_IN_PACKAGE = "usr/libexec/docker/cli-plugins/docker-compose"
CACHE = Path("/var/cache/gear-compose-v2")


def compose_v2_version() -> str | None:
    """``docker compose version --short`` if the docker CLI has the compose plugin, else None."""
    try:
        done = subprocess.run(
            ["docker", "compose", "version", "--short"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return None
    version = done.stdout.strip()
    return version if done.returncode == 0 and version[:1].isdigit() else None


def ensure_compose_v2(prefix: str, mirror: str) -> str:
    """Make ``docker compose`` work; returns its version.

    Raises:
        StepError: if the package cannot be downloaded or holds no plugin.
    """
    if version := compose_v2_version():
        return version
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise StepError("no compose v2, and no apt-get/dpkg-deb to fetch Debian's")
    lists, archives = CACHE / "lists", CACHE / "archives"
    for directory in (lists / "partial", archives / "partial"):
        directory.mkdir(parents=True, exist_ok=True)
    (CACHE / "sources.list").write_text(f"deb {mirror} {SUITE} main\n")
    apt = [
        "apt-get",
        "-q",
        "-o",
        f"Dir::Etc::SourceList={CACHE / 'sources.list'}",
        "-o",
        "Dir::Etc::SourceParts=/dev/null",
        "-o",
        f"Dir::State::Lists={lists}",
        "-o",
        f"Dir::Cache={CACHE}",
        "-o",
        "APT::Sandbox::User=root",
    ]
    with step(
        prefix, f"compose v2: Debian {SUITE}'s docker-compose package as a docker CLI plugin ({PLUGIN})"
    ):
        run([*apt, "update"], timeout=600)
        for old in CACHE.glob("docker-compose_*.deb"):
            old.unlink()
        done = subprocess.run(
            [*apt, "download", "docker-compose"],
            cwd=CACHE,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        packages = sorted(CACHE.glob("docker-compose_*.deb"))
        if done.returncode != 0 or not packages:
            raise StepError(
                f"apt-get download docker-compose ({SUITE}) failed:\n{done.stderr.strip()[-1500:]}"
            )
        with tempfile.TemporaryDirectory(prefix="gear-compose-v2-") as tmp:
            run(["dpkg-deb", "-x", str(packages[-1]), tmp], timeout=120)
            plugin = Path(tmp) / PLUGIN_IN_PACKAGE
            if not plugin.is_file():
                raise StepError(f"{packages[-1].name} holds no {PLUGIN_IN_PACKAGE}")
            PLUGIN.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(plugin, PLUGIN)
            PLUGIN.chmod(0o755)
    version = compose_v2_version()
    if version is None:
        raise StepError(f"{PLUGIN} is installed but `docker compose version` does not answer")
    say(prefix, f"docker compose {version} ({packages[-1].name})")
    return version

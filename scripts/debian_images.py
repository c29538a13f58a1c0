#!/usr/bin/env python3
"""Build Gear's local container images from Debian packages, for machines that reach no image registry.

One root filesystem (``debootstrap --variant=minbase`` of Debian bookworm plus rabbitmq-server,
python3-pip and ca-certificates) is imported as two images:

* ``gear-debian:bookworm-<hash>``: a Python base for the project's Dockerfile
  (``docker build --build-arg BASE_IMAGE=...``); pip installs into the system Python, as in
  ``python:3.11-slim``;
* ``gear-rabbitmq:bookworm-<hash>``: RabbitMQ in the foreground (``scripts/rabbitmq/entrypoint.sh``),
  configured with RabbitMQ's own variables (``RABBITMQ_NODE_PORT``, ``RABBITMQ_DIST_PORT``, ...) and
  files in ``/etc/rabbitmq/conf.d``; like ``rabbitmq:3.13-management`` it runs the management and
  Prometheus plugins, so one configuration fits both images.

``<hash>`` is a hash of the recipe (suite, packages, entrypoint, the CA certificates this machine added
locally), so the images are built once and reused until the recipe changes. Needs root and a Docker
engine (``scripts/docker_engine.py start``)::

    python3 scripts/debian_images.py           # build what is missing; print NAME=IMAGE lines
    python3 scripts/debian_images.py --plan    # print the NAME=IMAGE lines only, build nothing
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from _steps import StepError, apt_install, run, say, step

__all__ = ("Images", "ensure_images", "planned_images")

PREFIX = "images"
SUITE = "bookworm"
PACKAGES = ("rabbitmq-server", "python3-pip", "python-is-python3", "ca-certificates")
PLUGINS = ("rabbitmq_management", "rabbitmq_prometheus")
RECIPE_VERSION = 1
"""Bump when the build steps below change in a way the other inputs do not show."""

HERE = Path(__file__).resolve().parent
ENTRYPOINT = HERE / "rabbitmq" / "entrypoint.sh"
ENTRYPOINT_IN_IMAGE = "/usr/local/bin/gear-rabbitmq-entrypoint"
LOCAL_CA_DIR = Path("/usr/local/share/ca-certificates")
"""Where Debian keeps a machine's own CA certificates (a TLS-intercepting proxy's, say). They are added
to the base's trust store, so that ``pip install`` in ``docker build`` reaches PyPI as the host does."""
DEBOOTSTRAP_CACHE = Path("/var/cache/gear-debootstrap")
DEFAULT_MIRROR = "http://deb.debian.org/debian"

BASE_CHANGES = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    "ENV PIP_BREAK_SYSTEM_PACKAGES=1",
    'CMD ["python3"]',
)
RABBITMQ_CHANGES = (
    f'ENTRYPOINT ["{ENTRYPOINT_IN_IMAGE}"]',
    "CMD []",
    "ENV RABBITMQ_NODENAME=rabbit@localhost",
    "ENV RABBITMQ_LOGS=-",
    "EXPOSE 5672",
)


@dataclass(frozen=True, slots=True)
class Images:
    """The local images' names."""

    base: str
    rabbitmq: str

    def env(self) -> dict[str, str]:
        """The variables the tests read to use these images."""
        return {"GEAR_TEST_BASE_IMAGE": self.base, "GEAR_TEST_RABBITMQ_IMAGE": self.rabbitmq}


def _local_cas() -> list[Path]:
    return sorted(LOCAL_CA_DIR.rglob("*.crt")) if LOCAL_CA_DIR.is_dir() else []


def recipe_hash() -> str:
    """A short hash of everything that decides what the images contain."""
    digest = hashlib.sha256()
    recipe = {
        "version": RECIPE_VERSION,
        "suite": SUITE,
        "packages": PACKAGES,
        "plugins": PLUGINS,
        "base": BASE_CHANGES,
        "rabbitmq": RABBITMQ_CHANGES,
    }
    digest.update(json.dumps(recipe, sort_keys=True).encode())
    digest.update(ENTRYPOINT.read_bytes())
    for cert in _local_cas():
        digest.update(cert.read_bytes())
    return digest.hexdigest()[:12]


def planned_images() -> Images:
    """The names the images have (or will have) for the current recipe."""
    tag = f"{SUITE}-{recipe_hash()}"
    return Images(base=f"gear-debian:{tag}", rabbitmq=f"gear-rabbitmq:{tag}")


def image_exists(name: str) -> bool:
    """Whether the engine has an image called ``name``."""
    done = subprocess.run(["docker", "image", "inspect", name], capture_output=True, timeout=60, check=False)
    return done.returncode == 0


def debian_mirror() -> str:
    """``GEAR_DEBIAN_MIRROR``, else the first Debian archive in this machine's apt sources."""
    if mirror := os.environ.get("GEAR_DEBIAN_MIRROR"):
        return mirror
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in sources:
        if not path.is_file() or path.suffix not in ("", ".list", ".sources"):
            continue
        for match in re.finditer(r"(?:^deb|^URIs:)\s+(?:\[[^]]*\]\s+)?(\S+)", path.read_text(), re.M):
            if match.group(1).rstrip("/").endswith("/debian"):
                return match.group(1)
    return DEFAULT_MIRROR


def ensure_images() -> Images:
    """Build the images the current recipe names, unless they exist already.

    Raises:
        StepError: if a step fails (its message says which).
    """
    images = planned_images()
    missing = [name for name in (images.base, images.rabbitmq) if not image_exists(name)]
    if not missing:
        say(PREFIX, f"reusing {images.base} and {images.rabbitmq} (recipe unchanged)")
        return images
    if os.geteuid() != 0:
        raise StepError("building the local images needs root (debootstrap)")
    if shutil.which("debootstrap") is None:
        apt_install(PREFIX, ["debootstrap"])
    with step(PREFIX, f"build {', '.join(missing)} (first time only)"):
        if not image_exists(images.base):
            _build_base(images.base)
        if not image_exists(images.rabbitmq):
            _derive_rabbitmq(images.base, images.rabbitmq)
    return images


def _build_base(name: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="gear-rootfs-", dir="/var/tmp"))
    try:
        mirror = debian_mirror()
        DEBOOTSTRAP_CACHE.mkdir(parents=True, exist_ok=True)
        with step(PREFIX, f"debootstrap --variant=minbase {SUITE} + {' '.join(PACKAGES)} from {mirror}"):
            run(
                [
                    "debootstrap",
                    "--variant=minbase",
                    f"--include={','.join(PACKAGES)}",
                    f"--cache-dir={DEBOOTSTRAP_CACHE}",
                    SUITE,
                    str(root),
                    mirror,
                ],
                timeout=1200,
            )
        with step(PREFIX, "trim the root filesystem; add the entrypoint, plugins and local CAs"):
            _prepare(root)
        with step(PREFIX, f"docker import {name}"):
            tar = subprocess.Popen(
                ["tar", "--numeric-owner", "-C", str(root), "-cf", "-", "."], stdout=subprocess.PIPE
            )
            changes = [arg for change in BASE_CHANGES for arg in ("--change", change)]
            try:
                run(["docker", "import", *changes, "-", name], timeout=600, stdin=tar.stdout)
            finally:
                assert tar.stdout is not None
                tar.stdout.close()
                if tar.wait(timeout=600) != 0:
                    raise StepError(f"tar of the root filesystem exited with {tar.returncode}")
    finally:
        with step(PREFIX, f"remove {root}"):
            _remove_tree(root)


def _prepare(root: Path) -> None:
    """Trim the root filesystem, add the entrypoint and this machine's local CA certificates."""
    for path in (root / "var/cache/apt/archives").glob("*.deb"):
        path.unlink()
    for path in (root / "var/lib/apt/lists").glob("*_*"):
        path.unlink()
    # The package made an Erlang cookie; each container makes its own instead.
    (root / "var/lib/rabbitmq/.erlang.cookie").unlink(missing_ok=True)
    entrypoint = root / ENTRYPOINT_IN_IMAGE.lstrip("/")
    shutil.copyfile(ENTRYPOINT, entrypoint)
    entrypoint.chmod(0o755)
    (root / "etc/rabbitmq/enabled_plugins").write_text(f"[{','.join(PLUGINS)}].\n")
    cas = _local_cas()
    if cas:
        say(PREFIX, f"trusting {len(cas)} CA certificate(s) from {LOCAL_CA_DIR}, as this machine does")
        bundle = root / "etc/ssl/certs/ca-certificates.crt"
        with bundle.open("a") as out:
            for cert in cas:
                shutil.copyfile(cert, root / "usr/local/share/ca-certificates" / cert.name)
                out.write(cert.read_text().strip() + "\n")


def _derive_rabbitmq(base: str, name: str) -> None:
    """The RabbitMQ image: the base with the entrypoint and defaults set (no layer of its own)."""
    with step(PREFIX, f"docker commit {name}"):
        container = run(["docker", "create", base], timeout=120).strip()
        try:
            changes = [arg for change in RABBITMQ_CHANGES for arg in ("--change", change)]
            run(["docker", "commit", *changes, container, name], timeout=300)
        finally:
            run(["docker", "rm", container], timeout=120)


def _remove_tree(root: Path) -> None:
    """Delete the build's root filesystem, never through a mount left inside it."""
    fields = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
    mounts = [f[1] for f in fields if len(f) > 1]
    inside = [m for m in mounts if m == str(root) or m.startswith(f"{root}/")]
    if inside:
        say(PREFIX, f"NOT removing {root}: still mounted inside it: {', '.join(inside)}")
        return
    subprocess.run(["rm", "-rf", "--one-file-system", str(root)], check=False, timeout=600)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--plan", action="store_true", help="print the image names only; build nothing")
    args = parser.parse_args(argv)
    try:
        images = planned_images() if args.plan else ensure_images()
    except StepError as exc:
        say(PREFIX, f"error: {exc}")
        return 1
    for key, value in images.env().items():
        print(f"{key}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

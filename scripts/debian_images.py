#!/usr/bin/env python3
"""Build Gear's local container images from Debian packages, for machines that reach no image registry.

* ``gear-debian:bookworm-<hash>``: a Python base for the project's Dockerfile
  (``docker build --build-arg BASE_IMAGE=...``); pip installs into the system Python, as in
  ``python:3.11-slim``. One root filesystem (``debootstrap --variant=minbase`` of Debian bookworm plus
  rabbitmq-server, python3-pip and ca-certificates).
* ``gear-rabbitmq:<suite>-<hash>``: RabbitMQ in the foreground (``scripts/rabbitmq/entrypoint.sh``),
  configured with RabbitMQ's own variables (``RABBITMQ_NODE_PORT``, ``RABBITMQ_DIST_PORT``, ...) and
  files in ``/etc/rabbitmq/conf.d``; like ``rabbitmq:4-management`` it runs the management and
  Prometheus plugins, so one configuration fits every image. ``--rabbitmq`` picks the release:

  ====== ======================= ==================================================================
  3.10   bookworm (Debian 12)    the base image with its entrypoint set (no layer of its own)
  4.0    trixie (Debian 13)      its own minbase root: rabbitmq-server 4.0.x on Erlang 27
  4.3    forky (Debian 14)       its own minbase root: rabbitmq-server 4.3.x on Erlang 29 (default)
  ====== ======================= ==================================================================

  The 4.x roots are made as a chroot would need them, so they also run without Docker
  (``scripts/rabbitmq-node``): names resolve from files only (``/etc/hosts``, ``nsswitch.conf``, an
  Erlang ``inetrc``; a DNS lookup that never answers would hang the node's boot), and the ``rabbitmq``
  account gets the uid and gid of this machine's own ``rabbitmq`` account (or ids free here), never
  whatever the package picks (which may be the id of another account on this machine). forky's
  Release files are past their Valid-Until on some mirrors: apt there runs with
  ``Acquire::Check-Valid-Until=false``.

  The 4.x images add what makes them behave like the official ``rabbitmq:4-management`` where
  clients and ``docker-compose.yml`` see it: guest may log in over the network
  (``loopback_users.guest = false`` in ``conf.d/10-defaults.conf``), the node is
  ``rabbit@<hostname>`` (no ``RABBITMQ_NODENAME`` set), names resolve through the container's DNS
  after ``/etc/hosts`` (compose's network names the peers), and configuration is read from
  ``/etc/rabbitmq/rabbitmq.conf`` and ``/etc/rabbitmq/conf.d/``, data kept in ``/var/lib/rabbitmq``.
  What still differs: the Erlang cookie is a fresh random one per container unless
  ``RABBITMQ_ERLANG_COOKIE`` is set (the official image lets RabbitMQ make one), the data directory is
  not a volume, the node runs under a shell that turns ``docker stop``'s SIGTERM into ``rabbitmqctl
  stop`` (the official one runs the Erlang VM as PID 1), Debian's packages of Erlang and RabbitMQ
  (forky: 4.3.x on Erlang 29) rather than the official builds, and no ``rabbitmqadmin`` binary. The
  3.10 image is the old kind (``rabbit@localhost``, guest from localhost only): for the tests' host
  network, not for ``docker-compose.yml``.

``<hash>`` is a hash of the recipe (suite, packages, entrypoint, ids, the CA certificates this machine
added locally), so the images are built once and reused until the recipe changes; they are kept by the
Docker engine (``/var/lib/docker``) and the downloaded packages in ``/var/cache/gear-debootstrap``, both
outside the checkout. Needs root and a Docker engine (``scripts/docker_engine.py start``)::

    python3 scripts/debian_images.py                  # build what is missing; print NAME=IMAGE lines
    python3 scripts/debian_images.py --rabbitmq 4.0   # the same with RabbitMQ 4.0.x
    python3 scripts/debian_images.py --plan           # print the NAME=IMAGE lines only, build nothing
"""

from __future__ import annotations

import argparse
import grp
import hashlib
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from _steps import StepError, apt_install, run, say, step

__all__ = (
    "RELEASES",
    "Images",
    "Release",
    "build_rabbitmq_root",
    "ensure_images",
    "planned_images",
    "rabbitmq_image_hash",
    "rabbitmq_recipe_hash",
)

PREFIX = "images"
SUITE = "bookworm"
PACKAGES = ("rabbitmq-server", "python3-pip", "python-is-python3", "ca-certificates")
PLUGINS = ("rabbitmq_management", "rabbitmq_prometheus")
RECIPE_VERSION = 1
"""Bump when the build steps below change in a way the other inputs do not show."""
RABBITMQ_RECIPE_VERSION = 1
"""The same for the 4.x RabbitMQ roots."""


@dataclass(frozen=True, slots=True)
class Release:
    """Where one RabbitMQ release comes from: a Debian suite and how to bootstrap it."""

    suite: str
    script: str | None = None
    """debootstrap's script for the suite, when this machine's debootstrap does not know it by name."""
    check_valid_until: bool = True
    """False where the mirror's Release files may be past their Valid-Until date (testing, unstable)."""


RELEASES = {
    "3.10": Release(SUITE),
    "4.0": Release("trixie"),
    "4.3": Release("forky", script="sid", check_valid_until=False),
}
"""RabbitMQ release -> the Debian suite that packages it (3.10 is the base image's own)."""
DEFAULT_RABBITMQ = "4.3"

HERE = Path(__file__).resolve().parent
ENTRYPOINT = HERE / "rabbitmq" / "entrypoint.sh"
ENTRYPOINT_IN_IMAGE = "/usr/local/bin/gear-rabbitmq-entrypoint"
INETRC_IN_IMAGE = "/etc/rabbitmq/erl_inetrc"
INETRC = '{lookup, [file]}.\n{hosts_file, "/etc/hosts"}.\n'
"""Erlang resolves names from /etc/hosts only: a DNS server that never answers cannot hang the boot."""
HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
LOCAL_CA_DIR = Path("/usr/local/share/ca-certificates")
"""Where Debian keeps a machine's own CA certificates (a TLS-intercepting proxy's, say). They are added
to the base's trust store, so that ``pip install`` in ``docker build`` reaches PyPI as the host does."""
DEBOOTSTRAP_CACHE = Path(os.environ.get("GEAR_DEBOOTSTRAP_CACHE", "/var/cache/gear-debootstrap"))
"""Downloaded packages, kept between builds (``GEAR_DEBOOTSTRAP_CACHE``: another directory, e.g. an
empty one to time a build from nothing)."""
DEFAULT_MIRROR = "http://deb.debian.org/debian"
SERVICE_ACCOUNT = "rabbitmq"

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
ROOT_CHANGES = (
    *BASE_CHANGES[:2],
    f'ENTRYPOINT ["{ENTRYPOINT_IN_IMAGE}"]',
    "CMD []",
    "ENV RABBITMQ_LOGS=-",
    "EXPOSE 4369 5672 15672 15692 25672",
)
"""The 4.x images: a root of their own, so the PATH and locale are set here too. Unlike the 3.10 image
they set no node name: like the official image, the node is ``rabbit@<the container's hostname>``."""
OFFICIAL_DEFAULTS_IN_IMAGE = "/etc/rabbitmq/conf.d/10-defaults.conf"
OFFICIAL_DEFAULTS = (
    "# As in the official rabbitmq image (scripts/debian_images.py): guest may log in over the network,\n"
    "# not only from localhost. Do not take this into production.\n"
    "loopback_users.guest = false\n"
)
"""What the official image's ``10-defaults.conf`` sets that matters to clients (its other line sends
the log to the console, which ``RABBITMQ_LOGS=-`` does here)."""
IMAGE_NSSWITCH_HOSTS = "hosts:          files dns"
"""In a container, names resolve from ``/etc/hosts`` and then DNS, as in the official image: compose
names a service's peers through its own DNS server (the root keeps ``files`` only, for the chroot)."""
IMAGE_RECIPE_VERSION = 1
"""Bump when the image layer below changes in a way the other inputs do not show."""


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


def _digest(recipe: dict[str, object], *files: Path) -> str:
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode())
    for path in files:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def recipe_hash() -> str:
    """A short hash of everything that decides what the base image contains."""
    recipe = {
        "version": RECIPE_VERSION,
        "suite": SUITE,
        "packages": PACKAGES,
        "plugins": PLUGINS,
        "base": BASE_CHANGES,
        "rabbitmq": RABBITMQ_CHANGES,
    }
    return _digest(recipe, ENTRYPOINT, *_local_cas())


def service_ids() -> tuple[int, int]:
    """The uid and gid the image's ``rabbitmq`` account gets: this machine's own ``rabbitmq`` account's,
    else the highest system ids (below 1000) that no account or group here uses."""
    try:
        account = pwd.getpwnam(SERVICE_ACCOUNT)
        return account.pw_uid, account.pw_gid
    except KeyError:
        pass
    used_uids = {entry.pw_uid for entry in pwd.getpwall()}
    used_gids = {entry.gr_gid for entry in grp.getgrall()}
    uid = next(i for i in range(999, 99, -1) if i not in used_uids)
    gid = next(i for i in range(999, 99, -1) if i not in used_gids)
    return uid, gid


def rabbitmq_recipe_hash(release: Release) -> str:
    """A short hash of everything that decides what a 4.x RabbitMQ root contains (the chroot of
    ``scripts/rabbitmq-node``, and the image's starting point)."""
    recipe = {
        "version": RABBITMQ_RECIPE_VERSION,
        "release": [release.suite, release.script, release.check_valid_until],
        "plugins": PLUGINS,
        "inetrc": INETRC,
        "hosts": HOSTS,
        "ids": service_ids(),
    }
    return _digest(recipe, ENTRYPOINT)


def rabbitmq_image_hash(release: Release) -> str:
    """A short hash of everything that decides what a 4.x RabbitMQ image contains: its root and the
    layer that makes it behave like the official image."""
    recipe = {
        "version": IMAGE_RECIPE_VERSION,
        "root": rabbitmq_recipe_hash(release),
        "changes": ROOT_CHANGES,
        "defaults": [OFFICIAL_DEFAULTS_IN_IMAGE, OFFICIAL_DEFAULTS],
        "nsswitch": IMAGE_NSSWITCH_HOSTS,
    }
    return _digest(recipe)


def planned_images(rabbitmq: str = DEFAULT_RABBITMQ) -> Images:
    """The names the images have (or will have) for the current recipe and RabbitMQ ``rabbitmq``.

    Raises:
        StepError: if ``rabbitmq`` is not a release in :data:`RELEASES`.
    """
    release = _release(rabbitmq)
    tag = f"{SUITE}-{recipe_hash()}"
    base = f"gear-debian:{tag}"
    if release.suite == SUITE:
        return Images(base=base, rabbitmq=f"gear-rabbitmq:{tag}")
    return Images(base=base, rabbitmq=f"gear-rabbitmq:{release.suite}-{rabbitmq_image_hash(release)}")


def _release(rabbitmq: str) -> Release:
    try:
        return RELEASES[rabbitmq]
    except KeyError:
        raise StepError(f"no recipe for RabbitMQ {rabbitmq!r}: choose one of {', '.join(RELEASES)}") from None


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


def ensure_images(rabbitmq: str = DEFAULT_RABBITMQ) -> Images:
    """Build the images the current recipe names, unless they exist already.

    Raises:
        StepError: if a step fails (its message says which).
    """
    images = planned_images(rabbitmq)
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
            release = _release(rabbitmq)
            if release.suite == SUITE:
                _derive_rabbitmq(images.base, images.rabbitmq)
            else:
                _build_rabbitmq_root_image(release, images.rabbitmq)
    return images


def _debootstrap(suite: str, root: Path, packages: tuple[str, ...] = (), script: str | None = None) -> None:
    mirror = debian_mirror()
    DEBOOTSTRAP_CACHE.mkdir(parents=True, exist_ok=True)
    include = [f"--include={','.join(packages)}"] if packages else []
    scripts = [f"/usr/share/debootstrap/scripts/{script}"] if script else []
    what = " ".join(["debootstrap --variant=minbase", suite, *packages, "from", mirror])
    with step(PREFIX, what):
        run(
            [
                "debootstrap",
                "--variant=minbase",
                *include,
                f"--cache-dir={DEBOOTSTRAP_CACHE}",
                suite,
                str(root),
                mirror,
                *scripts,
            ],
            timeout=1200,
        )


def _import(root: Path, name: str, changes: tuple[str, ...]) -> None:
    with step(PREFIX, f"docker import {name}"):
        tar = subprocess.Popen(
            ["tar", "--numeric-owner", "-C", str(root), "-cf", "-", "."], stdout=subprocess.PIPE
        )
        flags = [arg for change in changes for arg in ("--change", change)]
        try:
            run(["docker", "import", *flags, "-", name], timeout=600, stdin=tar.stdout)
        finally:
            assert tar.stdout is not None
            tar.stdout.close()
            if tar.wait(timeout=600) != 0:
                raise StepError(f"tar of the root filesystem exited with {tar.returncode}")


def _build_base(name: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="gear-rootfs-", dir="/var/tmp"))
    try:
        _debootstrap(SUITE, root, PACKAGES)
        with step(PREFIX, "trim the root filesystem; add the entrypoint, plugins and local CAs"):
            _prepare(root)
            _add_local_cas(root)
        _import(root, name, BASE_CHANGES)
    finally:
        with step(PREFIX, f"remove {root}"):
            _remove_tree(root)


def _build_rabbitmq_root_image(release: Release, name: str) -> None:
    """A minbase root of ``release.suite`` with rabbitmq-server, imported as image ``name``."""
    root = Path(tempfile.mkdtemp(prefix=f"gear-rootfs-{release.suite}-", dir="/var/tmp"))
    try:
        build_rabbitmq_root(release, root)
        with step(PREFIX, "as the official image: guest over the network, names from DNS too"):
            _like_the_official_image(root)
        _import(root, name, ROOT_CHANGES)
    finally:
        with step(PREFIX, f"remove {root}"):
            _remove_tree(root)


def _like_the_official_image(root: Path) -> None:
    """What makes a 4.x image behave as ``rabbitmq:4-management`` does where clients and compose see it:
    guest logs in from other containers, and peers resolve by name through the container's DNS."""
    defaults = root / OFFICIAL_DEFAULTS_IN_IMAGE.lstrip("/")
    defaults.parent.mkdir(parents=True, exist_ok=True)
    defaults.write_text(OFFICIAL_DEFAULTS)
    nsswitch = root / "etc/nsswitch.conf"
    lines = [line for line in nsswitch.read_text().splitlines() if not line.startswith("hosts:")]
    nsswitch.write_text("\n".join([*lines, IMAGE_NSSWITCH_HOSTS]) + "\n")


def build_rabbitmq_root(release: Release, root: Path) -> None:
    """Make ``root`` (an empty directory) a minbase root of ``release.suite`` with rabbitmq-server, the
    entrypoint and plugins, names resolved from files and a ``rabbitmq`` account with this machine's ids:
    what the 4.x images hold, and what ``scripts/rabbitmq-node`` runs in a chroot.

    Raises:
        StepError: if a step fails.
    """
    _debootstrap(release.suite, root, script=release.script)
    with step(PREFIX, "a rabbitmq account with ids of this machine"):
        uid, gid = service_ids()
        chroot = ["chroot", str(root)]
        run([*chroot, "groupadd", "--system", "--gid", str(gid), SERVICE_ACCOUNT], timeout=60)
        home = ["--home-dir", "/var/lib/rabbitmq", "--no-create-home", "--shell", "/usr/sbin/nologin"]
        useradd = ["useradd", "--system", "--uid", str(uid), "--gid", str(gid), *home, SERVICE_ACCOUNT]
        run([*chroot, *useradd], timeout=60)
    _apt_install_in(root, release, ["rabbitmq-server"])
    with step(PREFIX, "trim the root filesystem; add the entrypoint and plugins; resolve from files"):
        _prepare(root)
        _resolve_from_files(root)  # after apt, which still needs DNS


def _resolve_from_files(root: Path) -> None:
    (root / "etc/hosts").write_text(HOSTS)
    nsswitch = root / "etc/nsswitch.conf"
    text = nsswitch.read_text() if nsswitch.exists() else ""
    lines = [line for line in text.splitlines() if not line.startswith("hosts:")]
    nsswitch.write_text("\n".join([*lines, "hosts:          files"]) + "\n")
    inetrc = root / INETRC_IN_IMAGE.lstrip("/")
    inetrc.parent.mkdir(parents=True, exist_ok=True)
    inetrc.write_text(INETRC)


def _apt_install_in(root: Path, release: Release, packages: list[str]) -> None:
    """``apt-get install`` inside the root, with no service started (``policy-rc.d`` answers 101)."""
    policy = root / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    options = [] if release.check_valid_until else ["-o", "Acquire::Check-Valid-Until=false"]
    apt = ["chroot", str(root), "apt-get", "-q", *options]
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive", "LANG": "C.UTF-8"}
    try:
        with step(PREFIX, f"apt-get install {' '.join(packages)} in {release.suite}"):
            run([*apt, "update"], timeout=600, env=env)
            run([*apt, "install", "-y", "--no-install-recommends", *packages], timeout=900, env=env)
            run([*apt, "clean"], timeout=120, env=env)
    finally:
        policy.unlink(missing_ok=True)


def _prepare(root: Path) -> None:
    """Trim the root filesystem; add the entrypoint and the plugins to enable."""
    for path in (root / "var/cache/apt/archives").glob("*.deb"):
        path.unlink()
    for path in (root / "var/lib/apt/lists").glob("*_*"):
        path.unlink()
    # The package made an Erlang cookie; each container makes its own instead.
    (root / "var/lib/rabbitmq/.erlang.cookie").unlink(missing_ok=True)
    entrypoint = root / ENTRYPOINT_IN_IMAGE.lstrip("/")
    entrypoint.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ENTRYPOINT, entrypoint)
    entrypoint.chmod(0o755)
    (root / "etc/rabbitmq/enabled_plugins").write_text(f"[{','.join(PLUGINS)}].\n")


def _add_local_cas(root: Path) -> None:
    cas = _local_cas()
    if cas:
        say(PREFIX, f"trusting {len(cas)} CA certificate(s) from {LOCAL_CA_DIR}, as this machine does")
        bundle = root / "etc/ssl/certs/ca-certificates.crt"
        with bundle.open("a") as out:
            for cert in cas:
                shutil.copyfile(cert, root / "usr/local/share/ca-certificates" / cert.name)
                out.write(cert.read_text().strip() + "\n")


def _derive_rabbitmq(base: str, name: str) -> None:
    """The 3.10 RabbitMQ image: the base with the entrypoint and defaults set (no layer of its own)."""
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
    parser.add_argument(
        "--rabbitmq", choices=sorted(RELEASES), default=DEFAULT_RABBITMQ, help="the RabbitMQ release"
    )
    args = parser.parse_args(argv)
    try:
        images = planned_images(args.rabbitmq) if args.plan else ensure_images(args.rabbitmq)
    except StepError as exc:
        say(PREFIX, f"error: {exc}")
        return 1
    for key, value in images.env().items():
        print(f"{key}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

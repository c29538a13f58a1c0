"""A network namespace joined to this one by a veth pair: a client with a non-loopback address.

Made with ``ip netns`` and ``ip link`` (root and CAP_NET_ADMIN needed); removed on exit whatever
happens. The pair gets a random /30 in 10.254.0.0/16, so parallel runs do not collide.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ("Namespace", "namespace", "namespace_unavailable")


@dataclass(frozen=True)
class Namespace:
    """The namespace's name, our address on the link and its address."""

    name: str
    host_ip: str
    client_ip: str

    def python(self, code: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run ``code`` with this interpreter inside the namespace."""
        return subprocess.run(
            ["ip", "netns", "exec", self.name, sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


def namespace_unavailable() -> str | None:
    """Why a namespace cannot be made here, or None."""
    if shutil.which("ip") is None:
        return "the `ip` tool (iproute2) is not installed"
    if os.geteuid() != 0:
        return "making a network namespace needs root"
    probe = f"gearprobe{uuid.uuid4().hex[:6]}"
    done = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        return f"`ip netns add` is not permitted here: {done.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=30)
    return None


@contextmanager
def namespace() -> Iterator[Namespace]:
    """A namespace with a veth link to this one; everything is deleted on exit."""
    tag = uuid.uuid4().hex[:6]
    name, host_if, ns_if = f"gear{tag}", f"gvh{tag}", f"gvn{tag}"
    subnet = random.randrange(0, 1 << 14)  # a /30 among 10.254.0.0/16
    base = (10 << 24) | (254 << 16) | (subnet << 2)
    host_ip, client_ip = (".".join(str((base + n) >> s & 255) for s in (24, 16, 8, 0)) for n in (1, 2))
    try:
        _ip("netns", "add", name)
        _ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        _ip("link", "set", ns_if, "netns", name)
        _ip("addr", "add", f"{host_ip}/30", "dev", host_if)
        _ip("link", "set", host_if, "up")
        _ip("-n", name, "addr", "add", f"{client_ip}/30", "dev", ns_if)
        _ip("-n", name, "link", "set", ns_if, "up")
        _ip("-n", name, "link", "set", "lo", "up")
        yield Namespace(name, host_ip, client_ip)
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "del", host_if], capture_output=True, timeout=30)

"""Consistent hashing: which REPO instance holds a key.

REPO is stateful: each instance keeps its own part of the data, so a caller must address the right one
(``REPO.<host>``) instead of the round-robin ``REPO`` queue. A hash ring maps every key to one host and, when
a host joins or leaves, moves only the keys that hashed next to it (about 1/N of them), where ``hash % N``
would reshuffle almost everything.

Each host is placed on the ring many times ("virtual nodes") so the load spreads evenly even with three
hosts. The hash is SHA-1 rather than Python's ``hash()``, which is randomised per process: every WEB and
CTRL instance must agree on where a key lives.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable

__all__ = ("DEFAULT_REPLICAS", "HashRing")

DEFAULT_REPLICAS = 100
"""Virtual nodes per host."""


def _point(text: str) -> int:
    return int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest()[:8], "big")


class HashRing:
    """A ring of hosts; :meth:`host_for` gives the host that owns a key.

    Raises:
        ValueError: ``host_for`` on an empty ring, or ``replicas`` < 1.
    """

    def __init__(self, hosts: Iterable[str] = (), replicas: int = DEFAULT_REPLICAS) -> None:
        if replicas < 1:
            raise ValueError("replicas must be at least 1")
        self._replicas = replicas
        self._points: list[int] = []
        self._owners: dict[int, str] = {}
        self._hosts: set[str] = set()
        for host in hosts:
            self.add(host)

    @property
    def hosts(self) -> tuple[str, ...]:
        """The hosts on the ring, sorted."""
        return tuple(sorted(self._hosts))

    def add(self, host: str) -> None:
        """Put ``host`` on the ring (no-op if it is there already)."""
        if host in self._hosts:
            return
        self._hosts.add(host)
        for i in range(self._replicas):
            point = _point(f"{host}#{i}")
            # A collision between two hosts' points is astronomically rare; first come keeps it.
            if point not in self._owners:
                self._owners[point] = host
                bisect.insort(self._points, point)

    def remove(self, host: str) -> None:
        """Take ``host`` off the ring; its keys move to the next hosts clockwise."""
        if host not in self._hosts:
            return
        self._hosts.discard(host)
        self._points = [p for p in self._points if self._owners[p] != host]
        self._owners = {p: h for p, h in self._owners.items() if h != host}

    def host_for(self, key: str) -> str:
        """The host that owns ``key``: the first virtual node clockwise from the key's hash."""
        if not self._points:
            raise ValueError("the hash ring has no hosts")
        index = bisect.bisect(self._points, _point(key)) % len(self._points)
        return self._owners[self._points[index]]

    def __len__(self) -> int:
        return len(self._hosts)

    def __contains__(self, host: object) -> bool:
        return host in self._hosts

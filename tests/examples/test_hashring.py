"""The consistent-hash ring WEB and CTRL use to find the REPO instance that holds a key."""

from __future__ import annotations

from collections import Counter

import pytest

from gear.examples.hashring import HashRing

KEYS = [f"key-{i}" for i in range(3000)]


def test_every_key_has_one_owner_and_it_is_stable() -> None:
    ring = HashRing(["repo1", "repo2", "repo3"])
    again = HashRing(["repo3", "repo1", "repo2"])  # another process, hosts in another order
    assert all(ring.host_for(k) == again.host_for(k) for k in KEYS)
    assert {ring.host_for(k) for k in KEYS} == {"repo1", "repo2", "repo3"}


def test_load_is_spread_evenly() -> None:
    counts = Counter(HashRing(["repo1", "repo2", "repo3"]).host_for(k) for k in KEYS)
    assert min(counts.values()) > len(KEYS) / 3 * 0.7


def test_adding_a_host_moves_only_the_keys_it_takes() -> None:
    ring = HashRing(["repo1", "repo2", "repo3"])
    before = {k: ring.host_for(k) for k in KEYS}
    ring.add("repo4")
    moved = [k for k in KEYS if ring.host_for(k) != before[k]]
    assert all(ring.host_for(k) == "repo4" for k in moved)
    assert 0.1 < len(moved) / len(KEYS) < 0.4  # about a quarter, where hash % N would move ~3/4


def test_removing_a_host_moves_only_its_keys() -> None:
    ring = HashRing(["repo1", "repo2", "repo3"])
    before = {k: ring.host_for(k) for k in KEYS}
    ring.remove("repo2")
    assert "repo2" not in ring
    for key in KEYS:
        if before[key] != "repo2":
            assert ring.host_for(key) == before[key]
        else:
            assert ring.host_for(key) in {"repo1", "repo3"}


def test_empty_ring_and_bad_replicas() -> None:
    with pytest.raises(ValueError, match="no hosts"):
        HashRing().host_for("k")
    with pytest.raises(ValueError, match="replicas"):
        HashRing(["a"], replicas=0)
    ring = HashRing(["a", "a"])
    assert len(ring) == 1
    assert ring.hosts == ("a",)

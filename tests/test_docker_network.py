"""``scripts/_docker_network.py`` takes out, after the dockerd it ran, docker's iptables rules and chains
only: other programs' rules on the same machine (a partition test's DROP on a loopback address, say)
stay."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "_docker_network.py"

# what `iptables -t filter -S` showed beside dockerd 20.10, with another program's rules around
FILTER = """\
-P INPUT ACCEPT
-P FORWARD DROP
-P OUTPUT ACCEPT
-N DOCKER
-N DOCKER-ISOLATION-STAGE-1
-N DOCKER-ISOLATION-STAGE-2
-N DOCKER-USER
-N GEAR-PARTITION
-A INPUT -s 127.0.0.2/32 -d 127.0.0.3/32 -j DROP
-A INPUT -j GEAR-PARTITION
-A FORWARD -j DOCKER-USER
-A FORWARD -j DOCKER-ISOLATION-STAGE-1
-A FORWARD -o docker0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A FORWARD -o docker0 -j DOCKER
-A FORWARD -i docker0 ! -o docker0 -j ACCEPT
-A FORWARD -i br-0123456789ab -o br-0123456789ab -j ACCEPT
-A FORWARD -i eth1 -o eth2 -j ACCEPT
-A OUTPUT -d 127.0.0.4/32 -m comment --comment "a partition test's, with -j DOCKER in its comment" -j DROP
-A DOCKER-ISOLATION-STAGE-1 -i docker0 ! -o docker0 -j DOCKER-ISOLATION-STAGE-2
-A DOCKER-ISOLATION-STAGE-1 -j RETURN
-A DOCKER-ISOLATION-STAGE-2 -o docker0 -j DROP
-A DOCKER-USER -j RETURN
-A GEAR-PARTITION -s 127.0.0.5/32 -j DROP
"""
NAT = """\
-P PREROUTING ACCEPT
-N DOCKER
-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER
-A OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j DOCKER
-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE
-A POSTROUTING -s 10.9.0.0/24 -o eth0 -j MASQUERADE
-A DOCKER -i docker0 -j RETURN
"""


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_docker_network", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def test_only_dockers_rules_and_chains_are_picked_in_filter() -> None:
    rules, chains = _load().docker_rules(FILTER)
    assert chains == ["DOCKER", "DOCKER-ISOLATION-STAGE-1", "DOCKER-ISOLATION-STAGE-2", "DOCKER-USER"]
    assert rules == [
        ["-D", "FORWARD", "-j", "DOCKER-USER"],
        ["-D", "FORWARD", "-j", "DOCKER-ISOLATION-STAGE-1"],
        [
            "-D",
            "FORWARD",
            "-o",
            "docker0",
            "-m",
            "conntrack",
            "--ctstate",
            "RELATED,ESTABLISHED",
            "-j",
            "ACCEPT",
        ],
        ["-D", "FORWARD", "-o", "docker0", "-j", "DOCKER"],
        ["-D", "FORWARD", "-i", "docker0", "!", "-o", "docker0", "-j", "ACCEPT"],
        ["-D", "FORWARD", "-i", "br-0123456789ab", "-o", "br-0123456789ab", "-j", "ACCEPT"],
    ]


def test_only_dockers_rules_and_chains_are_picked_in_nat() -> None:
    rules, chains = _load().docker_rules(NAT)
    assert chains == ["DOCKER"]
    assert rules == [
        ["-D", "PREROUTING", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "DOCKER"],
        ["-D", "OUTPUT", "!", "-d", "127.0.0.0/8", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "DOCKER"],
        ["-D", "POSTROUTING", "-s", "172.17.0.0/16", "!", "-o", "docker0", "-j", "MASQUERADE"],
    ]

"""What dockerd with bridge networking changes on the host: noted before it starts, undone after it stops.

dockerd's default bridge (``docker0``) and every compose network (``br-<id>``) need IPv4 forwarding and
iptables rules: chains of its own (``DOCKER``, ``DOCKER-USER``, ``DOCKER-ISOLATION-STAGE-1/2`` in
``filter``, ``DOCKER`` in ``nat``), jumps to them and ``ACCEPT``/``MASQUERADE`` rules for its bridges
in the built-in chains. dockerd leaves these behind when it exits; so does the ``docker0`` link, the
forwarding switch it turned on and the ``FORWARD`` policy it set to ``DROP``.

:func:`note_host` records the forwarding switch and the ``FORWARD`` policy before dockerd starts;
:func:`undo_docker_changes` (after it stopped) deletes only docker's rules and chains, the links of its
bridges, and puts the switch and the policy back. Nothing else in iptables is touched: other programs on
the machine keep their rules (no table is flushed). Standard library only.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ("HostNetwork", "docker_rules", "note_host", "undo_docker_changes")

IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")
TABLES = ("filter", "nat")
_DOCKER_CHAIN = re.compile(r"^DOCKER(-[A-Z0-9-]+)?$")
_DOCKER_LINK = re.compile(r"^(docker0|br-[0-9a-f]{12})$")


@dataclass(frozen=True, slots=True)
class HostNetwork:
    """What dockerd may change, as it was before it started."""

    ip_forward: str
    forward_policy: str | None
    """The ``filter`` table's ``FORWARD`` policy; None where iptables is missing."""
    links: tuple[str, ...]
    """Bridge links of docker's naming that existed already (left alone afterwards)."""


def _iptables(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["iptables", "-w", "10", *args], capture_output=True, text=True, timeout=60, check=False
    )


def _links() -> tuple[str, ...]:
    return tuple(sorted(p.name for p in Path("/sys/class/net").iterdir() if _DOCKER_LINK.match(p.name)))


def _forward_policy() -> str | None:
    if shutil.which("iptables") is None:
        return None
    listing = _iptables("-t", "filter", "-S", "FORWARD")
    match = re.search(r"^-P FORWARD (\S+)$", listing.stdout, re.M)
    return match.group(1) if listing.returncode == 0 and match else None


def note_host(path: Path) -> HostNetwork:
    """Record the forwarding switch, the ``FORWARD`` policy and docker-named links in ``path``.

    A note left by an earlier start whose dockerd died without ``stop`` is kept: it holds the host as
    it was before that dockerd changed it.
    """
    if (earlier := _read_note(path)) is not None:
        return earlier
    noted = HostNetwork(
        ip_forward=IP_FORWARD.read_text().strip(), forward_policy=_forward_policy(), links=_links()
    )
    fields = {"ip_forward": noted.ip_forward, "forward_policy": noted.forward_policy, "links": noted.links}
    path.write_text(json.dumps(fields) + "\n")
    return noted


def _read_note(path: Path) -> HostNetwork | None:
    try:
        data = json.loads(path.read_text())
        return HostNetwork(str(data["ip_forward"]), data["forward_policy"], tuple(data["links"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def docker_rules(listing: str) -> tuple[list[list[str]], list[str]]:
    """From ``iptables -S`` output: the built-in chains' rules that are docker's (as ``-D`` arguments)
    and docker's own chains.

    A rule is docker's if it jumps to a ``DOCKER*`` chain or names a docker bridge (``docker0``,
    ``br-<12 hex>``) as its in- or out-interface.
    """
    rules: list[list[str]] = []
    chains: list[str] = []
    for line in listing.splitlines():
        words = shlex.split(line)
        if len(words) >= 2 and words[0] == "-N" and _DOCKER_CHAIN.match(words[1]):
            chains.append(words[1])
        elif len(words) >= 3 and words[0] == "-A" and not _DOCKER_CHAIN.match(words[1]):
            jumps = {words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-j", "-g")}
            links = {words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-i", "-o")}
            if any(_DOCKER_CHAIN.match(j) for j in jumps) or any(_DOCKER_LINK.match(n) for n in links):
                rules.append(["-D", *words[1:]])
    return rules, chains


def undo_docker_changes(path: Path) -> list[str]:
    """Delete docker's iptables rules and chains and its bridge links; restore the forwarding switch
    and the ``FORWARD`` policy noted in ``path``. Call it only once dockerd has exited.

    Returns what it did, one line per change (empty if there was nothing to undo).
    """
    done: list[str] = []
    noted = _read_note(path)
    if shutil.which("iptables") is not None:
        for table in TABLES:
            listing = _iptables("-t", table, "-S")
            if listing.returncode != 0:
                continue
            rules, chains = docker_rules(listing.stdout)
            for rule in rules:
                if _iptables("-t", table, *rule).returncode == 0:
                    done.append(f"iptables -t {table} {shlex.join(rule)}")
            for chain in chains:
                _iptables("-t", table, "-F", chain)
            for chain in chains:
                if _iptables("-t", table, "-X", chain).returncode == 0:
                    done.append(f"iptables -t {table} -X {chain}")
        policy = noted.forward_policy if noted is not None else None
        if policy and _forward_policy() != policy and _iptables("-P", "FORWARD", policy).returncode == 0:
            done.append(f"iptables -P FORWARD {policy}")
    kept = set(noted.links) if noted is not None else set()
    for link in _links():
        if link not in kept:
            removed = subprocess.run(
                ["ip", "link", "delete", link], capture_output=True, timeout=30, check=False
            )
            if removed.returncode == 0:
                done.append(f"ip link delete {link}")
    if noted is not None and IP_FORWARD.read_text().strip() != noted.ip_forward:
        IP_FORWARD.write_text(noted.ip_forward + "\n")
        done.append(f"net.ipv4.ip_forward = {noted.ip_forward}")
    path.unlink(missing_ok=True)
    return done

"""The faults of ``scripts/rabbitmq-cluster43`` beyond a killed VM: a node cut off by packet filter
rules, a node's data disk failing; and the record of which are in force (standard library only)."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from pathlib import Path

from _cluster43 import Cluster, ClusterError, Node, sh
from _steps import StepError, apt_install

__all__ = ("cut", "disk_fault", "faults", "forget", "need_iptables", "uncut")

PREFIX = "rabbitmq-cluster43"
FULL_LEAVES_MB = 8
"""Free space ``disk N full`` leaves: below RabbitMQ's default ``disk_free_limit`` (50 MB)."""
RULE_TAG = "gear-cluster"
EXT4_IOC_SHUTDOWN = 0x8004587D
EXT4_GOING_FLAGS_NOLOGFLUSH = 2


def rules(cluster: Cluster) -> list[str]:
    """Our iptables rules, as ``-A ...`` lines."""
    done = sh("iptables", "-S", "INPUT", check=False)
    return [line for line in done.stdout.splitlines() if f"{RULE_TAG}-{cluster.name}" in line]


def need_iptables() -> None:
    """Install ``iptables`` (Debian's package) unless it is there.

    Raises:
        ClusterError: it is missing and cannot be installed.
    """
    if subprocess.run(["which", "iptables"], capture_output=True, check=False).returncode != 0:
        try:
            apt_install(PREFIX, ["iptables"])
        except StepError as exc:
            raise ClusterError(f"iptables is missing and could not be installed: {exc}") from None


def cut(node: Node) -> None:
    """Drop every packet from or to the node's address (both directions of every connection)."""
    need_iptables()
    tag = f"{RULE_TAG}-{node.cluster.name}"
    for direction in ("-s", "-d"):
        sh(
            "iptables",
            "-I",
            "INPUT",
            direction,
            f"{node.address}/32",
            "-m",
            "comment",
            "--comment",
            tag,
            "-j",
            "DROP",
        )
    record(node.cluster, node, "cut")


def uncut(cluster: Cluster) -> int:
    """Remove every rule ``cut`` added; how many there were."""
    found = (
        rules(cluster)
        if subprocess.run(["which", "iptables"], capture_output=True, check=False).returncode == 0
        else []
    )
    for line in found:
        sh("iptables", *line.replace("-A ", "-D ", 1).split(), check=False)
    for node in cluster.nodes:
        forget(cluster, node, "cut")
    return len(found)


def disk_fault(node: Node, fault: str) -> None:
    """Fail the node's data file system: ``error``, ``eio``, ``full``; ``space`` gives the space back."""
    target = node.outside(node.data)
    if fault == "error":
        device = Path(os.path.realpath(sh("findmnt", "-n", "-o", "SOURCE", str(target)).stdout.strip()))
        Path(f"/sys/fs/ext4/{device.name}/trigger_fs_error").write_text("1\n")
    elif fault == "eio":
        fd = os.open(target, os.O_RDONLY)
        try:
            fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, EXT4_GOING_FLAGS_NOLOGFLUSH.to_bytes(4, "little"))
        finally:
            os.close(fd)
    elif fault == "full":
        stat = os.statvfs(target)
        free = stat.f_bavail * stat.f_frsize - FULL_LEAVES_MB * 1024 * 1024
        if free > 0:
            sh("fallocate", "-l", str(free), str(target / "gear-filler"))
    elif fault == "space":
        (target / "gear-filler").unlink(missing_ok=True)
        forget(node.cluster, node, "disk")
        return
    record(node.cluster, node, "disk")


def faults(cluster: Cluster) -> dict[str, list[str]]:
    try:
        return json.loads(cluster.state_file.read_text())
    except (OSError, ValueError):
        return {}


def record(cluster: Cluster, node: Node, fault: str) -> None:
    state = faults(cluster)
    state[str(node.index)] = sorted({*state.get(str(node.index), []), fault})
    cluster.state_file.write_text(json.dumps(state))


def forget(cluster: Cluster, node: Node, fault: str) -> None:
    state = faults(cluster)
    state[str(node.index)] = [f for f in state.get(str(node.index), []) if f != fault]
    if cluster.state_file.exists():
        cluster.state_file.write_text(json.dumps(state))

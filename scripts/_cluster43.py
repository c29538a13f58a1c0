"""The pieces of ``scripts/rabbitmq-cluster43``: where each node's files, addresses and ports are, the
overlay root it runs in, its data file system, and its Erlang VM (standard library only)."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import string
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from _steps import StepError

__all__ = (
    "BOOT_TIMEOUT",
    "CTL_TIMEOUT",
    "IN_ROOT",
    "RELEASE",
    "SIZE",
    "Cluster",
    "ClusterError",
    "Node",
    "answers",
    "boot",
    "ctl",
    "in_root",
    "kill",
    "mount_disk",
    "mount_root",
    "mounts",
    "prepare",
    "say",
    "sh",
    "start_epmd",
    "step",
    "unmount_disk",
    "unmount_root",
    "vm_pid",
    "wait_gone",
)

SIZE = 3
RELEASE = "4.3"
BOOT_TIMEOUT = 120.0
CTL_TIMEOUT = 60.0
DISK_MB = 256
"""Size of each node's data file system."""
IN_ROOT = Path("/var/lib/gear-cluster")
"""Where, inside the root, the cluster keeps its cookie and each node its files."""


class ClusterError(Exception):
    """Something about the cluster failed; the message says what."""


def say(text: str) -> None:
    print(text, flush=True)


@contextlib.contextmanager
def step(what: str) -> Iterator[None]:
    """Print what is being done, then how long it took."""
    started = time.monotonic()
    print(f"{what} ...", end="", flush=True)
    try:
        yield
    except BaseException:
        print(f" failed after {time.monotonic() - started:.1f}s", flush=True)
        raise
    print(f" {time.monotonic() - started:.1f}s", flush=True)


@dataclass(frozen=True)
class Node:
    """One node: its name, address, ports and files (paths inside the root)."""

    index: int
    cluster: Cluster

    @property
    def address(self) -> str:
        return f"127.0.0.{self.index + 1}"

    @property
    def host(self) -> str:
        return f"{self.cluster.name}-n{self.index}"

    @property
    def nodename(self) -> str:
        return f"{self.cluster.name}{self.index}@{self.host}"

    @property
    def port(self) -> int:
        return self.cluster.first_port + self.index

    @property
    def dist_port(self) -> int:
        return self.port + 20000

    @property
    def management_port(self) -> int:
        return self.port + 10000

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@{self.address}:{self.port}/"

    @property
    def home(self) -> Path:
        """The node's directory, inside the root."""
        return IN_ROOT / f"node{self.index}"

    @property
    def data(self) -> Path:
        """Its data directory (the mount point of its own file system), inside the root."""
        return self.home / "data"

    @property
    def log_file(self) -> Path:
        return self.home / "log" / "node.log"

    @property
    def disk_file(self) -> Path:
        """The file behind its data file system, outside the root."""
        return self.cluster.base / f"disk{self.index}.ext4"

    def outside(self, path: Path) -> Path:
        """``path`` (inside the root) as seen from outside."""
        return self.cluster.root / path.relative_to("/")

    def environment(self) -> dict[str, str]:
        ip = self.address.replace(".", ",")
        erl = (
            f"-kernel inet_dist_use_interface {{{ip}}} "
            f"-kernel inet_dist_connect_options [{{ip,{{{ip}}}}}] "
            f"-kernel net_ticktime {self.cluster.net_ticktime}"
        )
        return {
            **self.cluster.environment(),
            "RABBITMQ_NODENAME": self.nodename,
            "RABBITMQ_NODE_IP_ADDRESS": self.address,
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_CONFIG_FILE": str(self.home / "rabbitmq.conf"),
            # not the root's /etc/rabbitmq/conf.d, where scripts/rabbitmq-node writes its own node's
            "RABBITMQ_CONFIG_FILES": str(self.home / "conf.d"),
            "RABBITMQ_MNESIA_BASE": str(self.data),
            "RABBITMQ_MNESIA_DIR": str(self.data / self.nodename),
            "RABBITMQ_LOG_BASE": str(self.log_file.parent),
            "RABBITMQ_LOGS": str(self.log_file),
            "RABBITMQ_PID_FILE": str(self.home / "node.pid"),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": erl,
        }


@dataclass(frozen=True)
class Cluster:
    """The three nodes, the root they run in and the base directory outside it."""

    name: str
    first_port: int
    base: Path
    net_ticktime: int

    @property
    def nodes(self) -> tuple[Node, ...]:
        return tuple(Node(i, self) for i in range(1, SIZE + 1))

    def node(self, index: int) -> Node:
        return self.nodes[index - 1]

    @property
    def root(self) -> Path:
        """The overlay the nodes run in."""
        return self.base / "root"

    @property
    def epmd_port(self) -> int:
        return self.first_port - 1300

    @property
    def state_file(self) -> Path:
        return self.base / "faults.json"

    def environment(self) -> dict[str, str]:
        """What every command inside the root gets (rabbitmqctl, epmd, the nodes)."""
        return {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "HOME": str(IN_ROOT),
            "RABBITMQ_CONF_ENV_FILE": str(IN_ROOT / "rabbitmq-env.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(IN_ROOT / "enabled_plugins"),
            "RABBITMQ_CTL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            "ERL_EPMD_PORT": str(self.epmd_port),
            "ERL_INETRC": "/etc/rabbitmq/erl_inetrc",
        }


# -- commands inside the root ------------------------------------------------------------------------


def in_root(cluster: Cluster, args: Sequence[str], env: dict[str, str] | None = None) -> list[str]:
    """A command line that runs ``args`` inside the root as the ``rabbitmq`` account."""
    variables = [f"{k}={v}" for k, v in (env or cluster.environment()).items()]
    return [
        "chroot",
        "--userspec=rabbitmq:rabbitmq",
        str(cluster.root),
        "env",
        "-i",
        *variables,
        *args,
    ]


def ctl(
    cluster: Cluster,
    node: Node,
    *args: str,
    timeout: float = CTL_TIMEOUT,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """``rabbitmqctl -n NODE args...`` inside the root.

    Raises:
        ClusterError: it failed (with ``check``) or timed out.
    """
    cmd = in_root(cluster, ["/usr/lib/rabbitmq/bin/rabbitmqctl", "-n", node.nodename, *args])
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ClusterError(
            f"rabbitmqctl {' '.join(args)} on {node.nodename}: no answer in {timeout:g}s"
        ) from None
    if check and done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise ClusterError(f"rabbitmqctl {' '.join(args)} on {node.nodename}: {' / '.join(detail[-3:])}")
    return done


def sh(*args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise ClusterError(f"`{' '.join(args)}` failed: {(done.stderr or done.stdout).strip()}")
    return done


# -- the root: an overlay of rabbitmq-node's, mounts ---------------------------------------------------


def mounts() -> list[str]:
    return [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]


def shared_root() -> Path:
    """scripts/rabbitmq-node's forky root, built if missing.

    Raises:
        ClusterError: it cannot be built.
    """
    from importlib.machinery import SourceFileLoader

    node_script = SourceFileLoader(
        "rabbitmq_node", str(Path(__file__).with_name("rabbitmq-node"))
    ).load_module()
    node = node_script.Node(RELEASE)
    try:
        node_script.ensure_root(node)
    except StepError as exc:
        raise ClusterError(f"cannot build the RabbitMQ {RELEASE} root: {exc}") from None
    return Path(node.root)


def mount_root(cluster: Cluster) -> None:
    """The overlay (read-only lower: the shared root), its /proc, each node's data file system."""
    root = cluster.root
    if str(root) not in mounts():
        lower = shared_root()
        for part in ("upper", "work", "root"):
            (cluster.base / part).mkdir(parents=True, exist_ok=True)
        options = f"lowerdir={lower},upperdir={cluster.base / 'upper'},workdir={cluster.base / 'work'}"
        sh("mount", "-t", "overlay", "overlay", "-o", options, str(root))
    if str(root / "proc") not in mounts():
        sh("mount", "-t", "proc", "proc", str(root / "proc"))
    for node in cluster.nodes:
        mount_disk(node)


def mount_disk(node: Node) -> None:
    """Mount the node's data file system (made on first use)."""
    target = node.outside(node.data)
    if str(target) in mounts():
        return
    target.mkdir(parents=True, exist_ok=True)
    if not node.disk_file.exists():
        with node.disk_file.open("wb") as handle:
            handle.truncate(DISK_MB * 1024 * 1024)
        sh("mkfs.ext4", "-q", "-F", "-m", "0", str(node.disk_file))
    sh("mount", "-o", "loop,errors=remount-ro", str(node.disk_file), str(target))
    os.chown(target, *rabbitmq_ids(node.cluster))


def unmount_disk(node: Node) -> None:
    """Unmount the node's data file system and free its loop device (the node must be down)."""
    target = node.outside(node.data)
    if str(target) in mounts():
        sh("umount", "-l", str(target), check=False)
    for line in sh("losetup", "-j", str(node.disk_file), check=False).stdout.splitlines():
        sh("losetup", "-d", line.split(":", 1)[0], check=False)


def unmount_root(cluster: Cluster) -> None:
    for node in cluster.nodes:
        unmount_disk(node)
    for path in (cluster.root / "proc", cluster.root):
        if str(path) in mounts():
            sh("umount", "-l", str(path), check=False)


def rabbitmq_ids(cluster: Cluster) -> tuple[int, int]:
    for line in (cluster.root / "etc/passwd").read_text().splitlines():
        fields = line.split(":")
        if fields[0] == "rabbitmq":
            return int(fields[2]), int(fields[3])
    raise ClusterError("the root has no rabbitmq account")


def prepare(cluster: Cluster) -> None:
    """Configuration, cookie, hosts file and empty node directories inside the overlay."""
    root = cluster.root
    uid, gid = rabbitmq_ids(cluster)
    base = cluster.nodes[0].outside(IN_ROOT)
    base.mkdir(parents=True, exist_ok=True)
    cookie = base / ".erlang.cookie"
    if not cookie.exists():
        cookie.write_text("".join(secrets.choice(string.ascii_uppercase) for _ in range(20)))
    cookie.chmod(0o400)
    (base / "rabbitmq-env.conf").write_text("# empty: the nodes are configured by their environment\n")
    (base / "enabled_plugins").write_text("[rabbitmq_management].\n")
    hosts = "127.0.0.1\tlocalhost\n" + "".join(f"{n.address}\t{n.host}\n" for n in cluster.nodes)
    (root / "etc/hosts").write_text(hosts)
    poll_ms = os.environ.get("GEAR_CLUSTER_DETECTOR_MS", "").strip()
    # how often quorum queues' failure detector (aten) polls the other nodes: 5000 ms by default, so a
    # cut-off node's queue leaders are re-elected only after 6-9 s
    detector = f"raft.adaptive_failure_detector.poll_interval = {int(poll_ms)}\n" if poll_ms else ""
    peers = "".join(
        f"cluster_formation.classic_config.nodes.{n.index} = {n.nodename}\n" for n in cluster.nodes
    )
    for node in cluster.nodes:
        home = node.outside(node.home)
        for sub in ("log", "conf.d"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        data = node.outside(node.data)
        for entry in data.iterdir() if data.exists() else ():
            sh("rm", "-rf", "--one-file-system", str(entry))
        (home / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = {node.address}:{node.port}\n"
            f"management.tcp.ip = {node.address}\nmanagement.tcp.port = {node.management_port}\n"
            "loopback_users.guest = false\n"
            "cluster_partition_handling = pause_minority\n"
            "cluster_formation.peer_discovery_backend = classic_config\n"
            f"{peers}"
            # a small data file system: the quorum write-ahead log rolls over at 16 MB, not 512 MB
            "raft.wal_max_size_bytes = 16777216\n"
            f"{detector}"
            "log.console = false\nlog.file.level = info\n"
        )
    for path in [base, *base.rglob("*")]:
        if not str(path).startswith(tuple(str(n.outside(n.data)) + "/" for n in cluster.nodes)):
            os.chown(path, uid, gid, follow_symlinks=False)


# -- node processes ------------------------------------------------------------------------------------


def vm_pid(node: Node) -> int | None:
    """The PID of the node's Erlang VM if it runs (found through its environment in /proc)."""
    wanted = f"RABBITMQ_NODENAME={node.nodename}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if b"beam" not in (entry / "cmdline").read_bytes().split(b"\0", 1)[0]:
                continue
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                return int(entry.name)
        except OSError:
            continue
    return None


def wait_gone(pid: int, timeout: float) -> bool:
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1]
        except (OSError, IndexError):
            return True
        if state.startswith("Z"):
            return True
        time.sleep(0.1)
    return False


def answers(node: Node) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex((node.address, node.port)) == 0


def start_epmd(cluster: Cluster) -> None:
    """One epmd for the four addresses (each node's distribution is found through its own)."""
    with socket.socket() as sock:
        sock.settimeout(1)
        if sock.connect_ex(("127.0.0.1", cluster.epmd_port)) == 0:
            return
    addresses = ",".join(["127.0.0.1", *(n.address for n in cluster.nodes)])
    env = {**cluster.environment(), "ERL_EPMD_ADDRESS": addresses}
    subprocess.run(in_root(cluster, ["epmd", "-daemon"], env), check=True, timeout=30)


def boot(node: Node) -> None:
    """Start the node's VM in the background and wait until RabbitMQ runs on it.

    Raises:
        ClusterError: it did not come up within BOOT_TIMEOUT (with the log's last lines).
    """
    cluster = node.cluster
    log = node.outside(node.home / "log" / "console.log").open("ab")
    subprocess.Popen(
        in_root(cluster, ["/usr/lib/rabbitmq/bin/rabbitmq-server"], node.environment()),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        cwd="/",
    )
    log.close()
    give_up = time.monotonic() + BOOT_TIMEOUT
    while True:
        if (
            answers(node)
            and ctl(
                cluster,
                node,
                "-q",
                "await_startup",
                "--timeout",
                "30",
                check=False,
                timeout=40,
            ).returncode
            == 0
        ):
            return
        if time.monotonic() > give_up:
            raise ClusterError(f"{node.nodename} did not start in {BOOT_TIMEOUT:g}s:\n{tail(node)}")
        if vm_pid(node) is None and time.monotonic() > give_up - BOOT_TIMEOUT + 15:
            raise ClusterError(f"{node.nodename} exited while booting:\n{tail(node)}")
        time.sleep(1)


def tail(node: Node, lines: int = 8) -> str:
    for path in (
        node.outside(node.log_file),
        node.outside(node.home / "log" / "console.log"),
    ):
        with contextlib.suppress(OSError):
            text = path.read_text(errors="replace").splitlines()
            if text:
                return "\n".join("    " + line for line in text[-lines:])
    return "    (no log)"


def kill(node: Node) -> None:
    pid = vm_pid(node)
    if pid is not None:
        os.kill(pid, signal.SIGKILL)
        if not wait_gone(pid, 10):
            raise ClusterError(f"pid {pid} still alive 10s after SIGKILL")

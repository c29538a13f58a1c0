"""One call in flight, where its time goes: Gear on asyncio and on uvloop (its entry points' loop),
Gear on the CPython its image runs (on asyncio, and on uvloop: Gear as its image runs it), Gear with
busy polling (``Settings.busy_poll``), Gear's hot modules compiled with mypyc, and the same job in
Go, in one run.

    python benchmarks/one_call.py [--url URL] [--windows 0.2,1] [--compiled] [--idle-poll]
        [--image-python /usr/bin/python3] [--rounds 5] [--seconds 2]

Every peer has a caller process and a server process of its own (Go's are
``benchmarks/go/rpcbench.go``, skipped with the reason where Go or amqp091-go is missing). Gear's
servers are ``rpc.py --serve gear``; its processes run on asyncio, but for the uvloop peers', and
on the interpreter this script runs on, but for the image's peers: Debian's ``python3`` (what Gear's
image runs where its base is built from Debian's packages; ``--image-python`` names another), in a
virtual environment built once with this checkout installed (``interpreter.py``). The output names
both interpreters, so the row says what a CPython built with default flags (pyenv's) costs a lone
call against an optimized build such as the image's.
A busy-polling peer sets ``GEAR_BUSY_POLL`` in both processes' environment, as a deployment would.
``--compiled`` builds a copy of ``gear/`` with the modules on a call's path compiled by mypyc
(``mypyc`` and a C compiler needed; cached by a hash of the sources) and runs a peer from it. Each
round gives every peer ``--seconds`` of calls made one after another, the order rotating from round
to round, with a pause between turns longer than any busy-poll window (so no peer's polling overlaps
another's turn).

A process that sleeps between frames is woken by each one, and how much a wake-up costs depends on
how the machine's idle CPUs wait: a CPU that halts (a virtual machine's vCPU exits to its host) takes
much longer to wake than one that polls. The output names the machine's idle setup (the cpuidle
driver and governor, and the guest halt-poll window where the ``haltpoll`` driver is in use).
``--idle-poll`` measures every peer twice per round, once with the CPUs idling as the machine has
them and once with them polling when idle: a PM QoS request for a wake-up latency of 0 us, held on
``/dev/cpu_dma_latency`` during those turns only (what ``tuned``'s latency-performance profile does;
root needed; the kernel drops the request when the file closes, so nothing is left changed). The
two settings alternate within each round, the one going first alternating from round to round. PM QoS
steers a cpuidle driver; on a machine with none (``cpuidle driver none``) idle CPUs halt whatever it
asks, so the second setting is skipped and the output says why.

Prints, per setting and peer, the median over rounds of p50 and p99 latency, calls per second and
the CPU per call of its caller and its server process, then the median of per-round ratios against
Go and against Gear as installed.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib.util
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import gobench
from _cleanup import delete_queues
from gobench import GoClient
from interpreter import IMAGE_PYTHON, describe, image_python
from rpc import PAYLOAD, loop_runner, proc_cpu

__all__ = ("Peer", "go_peer", "main")

_T = TypeVar("_T")

GO = "go amqp091"
_PAUSE = 0.05
"""Seconds between two turns: longer than any window, so the previous peer has stopped polling."""
_ME = Path(__file__).resolve()
_RPC = _ME.with_name("rpc.py")
_SOURCE = _ME.parent.parent / "gear"
COMPILED_MODULES = (
    "wire/frames.py", "wire/properties.py", "wire/table.py", "wire/codes.py", "wire/methods.py",
    "wire/content.py", "amqp/channel.py", "amqp/connection.py",
    "amqp/errors.py", "link/stream.py", "link/confirms.py", "link/publishing.py",
    "serving/inbound.py", "serving/dispatch.py", "calling/rpc.py", "session/publisher.py",
    "base/deadline.py", "serving/duplicates.py", "base/context.py",
)  # fmt: skip
"""What ``--compiled`` compiles: the modules a call and a request go through (paths under ``gear/``)."""
AS_IS = "idle CPUs as the machine has them"
IMAGE_PEER = "gear on the image's CPython"
IMAGE_UVLOOP_PEER = "gear on the image's CPython and uvloop"
IDLE_POLL = "idle CPUs polling (PM QoS request of 0 us on /dev/cpu_dma_latency)"
_QOS = Path("/dev/cpu_dma_latency")
_CPUIDLE = Path("/sys/devices/system/cpu/cpuidle")
_HALT_POLL = Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns")


# -- how idle CPUs wait ----------------------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _cpuidle_driver() -> str:
    return _read(_CPUIDLE / "current_driver") or "none"


def idle_setup() -> str:
    """How this machine's idle CPUs wait: the cpuidle driver and governor, and the guest halt-poll
    window (ns) where the ``haltpoll`` driver is in use."""
    driver = _cpuidle_driver()
    governor = _read(_CPUIDLE / "current_governor") or _read(_CPUIDLE / "current_governor_ro") or "none"
    setup = f"cpuidle driver {driver}, governor {governor}"
    halt_poll = _read(_HALT_POLL) if driver == "haltpoll" else None
    return setup if halt_poll is None else f"{setup}, guest_halt_poll_ns {halt_poll}"


@contextmanager
def idle_polling() -> Iterator[None]:
    """Keep every CPU polling when idle while inside: a PM QoS request for a wake-up latency of 0 us
    on ``/dev/cpu_dma_latency``, which the kernel drops when the file is closed.

    Raises:
        OSError: the file cannot be opened (it needs root) or written.
    """
    fd = os.open(_QOS, os.O_WRONLY)
    try:
        os.write(fd, struct.pack("i", 0))
        yield
    finally:
        os.close(fd)


def idle_polling_refused() -> str:
    """Why :func:`idle_polling` cannot make this machine's idle CPUs poll ("" when it can).

    PM QoS only steers a cpuidle driver's choice of idle state; with no driver, the kernel idles with
    its default halt whatever the request says.
    """
    if _cpuidle_driver() == "none":
        return (
            "no cpuidle driver: idle CPUs halt whatever PM QoS asks; idle=poll on the kernel command "
            "line, or the cpuidle-haltpoll driver on a KVM guest, would make them poll"
        )
    try:
        with idle_polling():
            return ""
    except OSError as exc:
        return f"{_QOS}: {exc.strerror or exc}"


# -- the Gear processes ----------------------------------------------------------------------------


async def _call(url: str, tag: str) -> None:
    """Answer ``SECONDS`` lines on stdin with one JSON line: the latencies and this process's CPU."""
    import gear

    svc = gear.Service.client(url=url, prefetch=512)
    await svc.start()
    target = f"BENCH{tag}.s1"  # the server is rpc.py's
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    perf = time.perf_counter
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        latencies: list[float] = []
        cpu0 = time.process_time()
        end = perf() + float(line)
        while perf() < end:
            t0 = perf()
            await svc.rpc.call(target, "echo", PAYLOAD)
            latencies.append(perf() - t0)
        print(json.dumps({"latencies": latencies, "cpu": time.process_time() - cpu0}), flush=True)
    queues = [q.name for q in svc.topology.queues]
    await svc.stop()
    await delete_queues(url, queues)  # the server's go once it has stopped (see _gear_peer)


# -- peers -----------------------------------------------------------------------------------------


@dataclass
class Peer:
    """One peer: a timed stretch of calls, its server's pid, and how to stop it."""

    name: str
    load: Callable[[float], Awaitable[dict[str, Any]]]
    server_pid: int
    close: Callable[[], Awaitable[None]]
    rounds: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    """Per setting (:data:`AS_IS`, :data:`IDLE_POLL`), the figures of each round."""


async def _process(*args: str, env: dict[str, str]) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        *args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, limit=gobench.LINE_LIMIT
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 60)
    if line.strip() != b"ready":
        raise SystemExit(f"{' '.join(args[:4])}: did not start")
    return proc


async def _stop(proc: asyncio.subprocess.Process) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        await asyncio.wait_for(proc.wait(), 20)
    except TimeoutError:
        proc.kill()


async def _gear_peer(
    name: str, url: str, env: dict[str, str], loop: str = "asyncio", python: str = sys.executable
) -> Peer:
    """Gear's server (``rpc.py --serve gear``) and a caller (this script's ``--call``), each a process
    of ``python`` on ``loop`` with ``env`` added to its environment."""
    tag = uuid.uuid4().hex[:6]
    env = {**os.environ, **env}
    args = ("--url", url, "--tag", tag, "--loop", loop)
    server = await _process(python, str(_RPC), "--serve", "gear", *args, env=env)
    caller = await _process(python, str(_ME), "--call", *args, env=env)
    assert caller.stdin is not None
    assert caller.stdout is not None
    stdin, stdout = caller.stdin, caller.stdout

    async def load(seconds: float) -> dict[str, Any]:
        stdin.write(f"{seconds}\n".encode())
        await stdin.drain()
        got: dict[str, Any] = json.loads(await asyncio.wait_for(stdout.readline(), seconds + 60))
        return got

    async def close() -> None:
        await _stop(caller)
        await _stop(server)
        # deleted while it still ran, the server would log a lost consumer and reconnect
        await delete_queues(url, [f"BENCH{tag}", f"BENCH{tag}.s1"])

    return Peer(name, load, server.pid, close)


async def go_peer(url: str, binary: Path) -> Peer:
    """The same job in Go: its server and its caller, each a process of its own."""
    tag = uuid.uuid4().hex[:6]
    server = await _process(*gobench.server_command(binary, url, tag), env=dict(os.environ))
    client = await GoClient.start(binary, url, tag)

    async def load(seconds: float) -> dict[str, Any]:
        got = await client.load(1, seconds)
        return {"latencies": got["latencies"], "cpu": got["cpu"]}

    async def close() -> None:
        await client.close()
        await _stop(server)  # it serves until its stdin closes

    return Peer(GO, load, server.pid, close)


def build_compiled() -> tuple[Path | None, str]:
    """A directory holding a copy of ``gear/`` with :data:`COMPILED_MODULES` compiled by mypyc, or
    ``(None, why not)``. Kept under the benchmarks' cache by a hash of the sources."""
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        return None, "no C compiler"
    try:
        import mypyc  # noqa: F401 - only asks whether it is installed
    except ImportError:
        return None, "mypyc is not installed (it comes with mypy)"
    digest = hashlib.sha256()
    for path in sorted(_SOURCE.rglob("*.py")):
        digest.update(str(path.relative_to(_SOURCE)).encode() + path.read_bytes())
    target = gobench.CACHE / f"gear-mypyc-{digest.hexdigest()[:12]}"
    if (target / "ok").exists():
        return target, ""
    shutil.rmtree(target, ignore_errors=True)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        shutil.copytree(_SOURCE, work / "gear", ignore=shutil.ignore_patterns("__pycache__"))
        print("compiling gear with mypyc...", file=sys.stderr, flush=True)
        done = subprocess.run(
            [sys.executable, "-m", "mypyc", *(f"gear/{m}" for m in COMPILED_MODULES)],
            cwd=work, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            return None, f"mypyc failed: {(done.stdout + done.stderr).strip()[-300:]}"
        probe = "import gear.serving.dispatch; print(gear.serving.dispatch.__file__)"
        where = subprocess.run(
            [sys.executable, "-c", probe], cwd=work, env={**os.environ, "PYTHONPATH": str(work)},
            capture_output=True, text=True, check=False,
        ).stdout.strip()  # fmt: skip
        if not where.endswith(".so"):
            return None, f"the compiled modules do not load (gear.serving.dispatch from {where or 'nowhere'})"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(work, target, ignore=shutil.ignore_patterns("build", "__pycache__"))
    (target / "ok").touch()
    return target, ""


# -- the run ---------------------------------------------------------------------------------------


async def _turn(peer: Peer, setting: str, seconds: float) -> None:
    server0 = proc_cpu(peer.server_pid)
    got = await peer.load(seconds)
    server = proc_cpu(peer.server_pid) - server0
    latencies = sorted(got["latencies"])
    n = len(latencies)
    peer.rounds.setdefault(setting, []).append(
        {
            "p50": latencies[n // 2] * 1000,
            "p99": latencies[min(n - 1, int(n * 0.99))] * 1000,
            "rps": n / sum(latencies),
            "caller_us": got["cpu"] / n * 1e6,
            "server_us": server / n * 1e6,
        }
    )


async def run(
    url: str,
    windows: list[float],
    compiled: bool,
    settings: list[str],
    rounds: int,
    seconds: float,
    image: Path | None = None,
) -> list[Peer]:
    """Start every peer, give each ``rounds`` turns of ``seconds`` per setting, stop them; the peers
    with their per-round figures. ``image``: the Python of the image's peer (none without it)."""
    binary, why = gobench.build()
    if binary is None:
        print(f"{GO}: skipped ({why})", file=sys.stderr)
    built: Path | None = None
    if compiled:
        built, why = build_compiled()
        if built is None:
            print(f"gear compiled: skipped ({why})", file=sys.stderr)
    peers: list[Peer] = []
    try:
        if binary is not None:
            peers.append(await go_peer(url, binary))
        peers.append(await _gear_peer("gear", url, {}))
        if image is not None:
            peers.append(await _gear_peer(IMAGE_PEER, url, {}, python=str(image)))
        if importlib.util.find_spec("uvloop") is not None:
            peers.append(await _gear_peer("gear on uvloop", url, {}, loop="uvloop"))
            if image is not None:
                peers.append(await _gear_peer(IMAGE_UVLOOP_PEER, url, {}, loop="uvloop", python=str(image)))
        else:
            print("gear on uvloop: skipped (uvloop is not installed here)", file=sys.stderr)
        for window in windows:
            env = {"GEAR_BUSY_POLL": str(window)}
            peers.append(await _gear_peer(f"gear busy_poll={window * 1000:g} ms", url, env))
        if built is not None:
            path = os.pathsep.join(filter(None, (str(built), os.environ.get("PYTHONPATH"))))
            peers.append(await _gear_peer("gear compiled (mypyc)", url, {"PYTHONPATH": path}))
        for peer in peers:  # warm-up, not counted
            await peer.load(min(0.5, seconds))
            await asyncio.sleep(_PAUSE)
        for r in range(rounds):
            for setting in _rotated(settings, r):
                with idle_polling() if setting == IDLE_POLL else nullcontext():
                    for peer in _rotated(peers, r):
                        await _turn(peer, setting, seconds)
                        await asyncio.sleep(_PAUSE)
            print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    finally:
        for peer in peers:
            await peer.close()
    return peers


def _rotated(items: list[_T], by: int) -> list[_T]:
    """``items`` rotated left by ``by`` places (so each round starts with a different one)."""
    at = by % len(items)
    return items[at:] + items[:at]


def report(peers: list[Peer], settings: list[str], rounds: int, seconds: float, skipped: str = "") -> None:
    """Print, per setting, the table and the per-round ratios (``skipped``: why idle CPUs were not
    also measured polling, if they were asked to be)."""
    print(f"This machine's idle CPUs: {idle_setup()}.")
    if skipped:
        print(f"\nNot measured with idle CPUs polling: {skipped}.")
    for setting in settings:
        print(
            f"\nOne call in flight, {setting}: median of {rounds} rounds of {seconds:g} s per peer (order "
            "rotating), 100 B JSON payload; CPU per call of the caller's and the server's process\n"
        )
        print("| peer | p50 ms | p99 ms | calls/s | caller CPU us/call | server CPU us/call |")
        print("|---|---:|---:|---:|---:|---:|")
        for peer in peers:
            turns = peer.rounds[setting]
            m = {k: statistics.median(r[k] for r in turns) for k in turns[0]}
            print(
                f"| {peer.name} | {m['p50']:.2f} | {m['p99']:.2f} | {m['rps']:,.0f} | "
                f"{m['caller_us']:.0f} | {m['server_us']:.0f} |"
            )
        for base in [p for p in peers if p.name in (GO, "gear")]:
            print(f"\nAgainst {base.name}, {setting}, median of per-round ratios (lower is better):\n")
            for peer in peers:
                if peer is not base:
                    p50, cpu = _ratios(peer.rounds[setting], base.rounds[setting])
                    print(f"- {peer.name}: p50 {p50:.2f}x, caller + server CPU per call {cpu:.2f}x")


def _ratios(turns: list[dict[str, float]], base: list[dict[str, float]]) -> tuple[float, float]:
    """The medians of the per-round ratios of p50 and of CPU per call (caller + server)."""
    pairs = list(zip(turns, base, strict=True))
    p50 = statistics.median(a["p50"] / b["p50"] for a, b in pairs)
    cpu = statistics.median(
        (a["caller_us"] + a["server_us"]) / (b["caller_us"] + b["server_us"]) for a, b in pairs
    )
    return p50, cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("GEAR_URL", "amqp://guest:guest@127.0.0.1:5672/"))
    parser.add_argument("--windows", default="0.2,1", help="busy-poll windows in ms, comma-separated")
    parser.add_argument("--compiled", action="store_true", help="add a peer compiled with mypyc")
    parser.add_argument(
        "--idle-poll", action="store_true", help="also measure with idle CPUs polling (PM QoS; root)"
    )
    parser.add_argument(
        "--image-python",
        default=IMAGE_PYTHON,
        help="the CPython of the image's peer ('' for none; default: Debian's, as Gear's image runs)",
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--call", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tag", default="", help=argparse.SUPPRESS)
    parser.add_argument("--loop", default="asyncio", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.call:
        with loop_runner(args.loop) as runner:
            runner.run(_call(args.url, args.tag))
        return
    windows = [float(w) / 1000 for w in args.windows.split(",") if w.strip()]
    if any(w <= 0 or w > 1 for w in windows):
        parser.error("each window must be over 0 and at most 1000 ms")
    settings = [AS_IS]
    refused = idle_polling_refused() if args.idle_poll else ""
    if args.idle_poll and not refused:
        settings.append(IDLE_POLL)
    image: Path | None = None
    if args.image_python:
        image, why = image_python(args.image_python)
        if image is None:
            print(f"{IMAGE_PEER}: skipped ({why})", file=sys.stderr)
    peers = asyncio.run(run(args.url, windows, args.compiled, settings, args.rounds, args.seconds, image))
    print(f"Gear's processes run on {describe(sys.executable)}", end="")
    print(f"; the {IMAGE_PEER!r} peer's on {describe(str(image))}.\n" if image is not None else ".\n")
    report(peers, settings, args.rounds, args.seconds, refused)


if __name__ == "__main__":
    main()

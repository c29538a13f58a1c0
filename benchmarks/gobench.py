"""The Go peer of the benchmarks: build ``benchmarks/go/rpcbench.go`` and drive its processes.

The binary is built from Debian's packages (``golang-go``, ``golang-github-rabbitmq-amqp091-go-dev``)
in GOPATH mode, so no module is downloaded, and cached under ``~/.cache/gear-bench`` by a hash of the
source. :func:`build` says why when it cannot (no Go, or no amqp091-go): the benchmarks then skip the
Go peer with that reason. The server runs on its own; the client is one long-lived process answering
commands on stdin (``call``; ``load C MILLIS``; ``trace MILLIS``), so a stretch of load costs no
process start and the latencies are measured inside Go. ``trace`` and a server started with
``RPCBENCH_TRACE=FILE`` stamp each call's stages on the clock of ``time.monotonic_ns``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

__all__ = ("GoClient", "build", "server_command")

SOURCE = Path(__file__).resolve().parent / "go" / "rpcbench.go"
GOCODE = "/usr/share/gocode"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gear-bench"
EXCHANGE = "gear.bench.go"
LINE_LIMIT = 2**24
"""Longest line read from a benchmark's child process (the Go client, a caller): a stretch of load
answers with every latency, as JSON."""


def build() -> tuple[Path | None, str]:
    """The built binary, or ``(None, why not)``."""
    go = shutil.which("go")
    if go is None:
        return None, "no Go toolchain (apt-get install golang-go golang-github-rabbitmq-amqp091-go-dev)"
    if not Path(GOCODE, "src/github.com/rabbitmq/amqp091-go").is_dir():
        return None, "no amqp091-go (apt-get install golang-github-rabbitmq-amqp091-go-dev)"
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    binary = CACHE / f"rpcbench-{digest}"
    if binary.exists():
        return binary, ""
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as gopath:
        env = {
            **os.environ,
            "GO111MODULE": "off",
            "GOPATH": f"{gopath}:{GOCODE}",
            "GOCACHE": str(CACHE / "gocache"),
        }
        done = subprocess.run(
            [go, "build", "-o", str(binary), str(SOURCE)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        return None, f"go build failed: {done.stderr.strip()[-300:]}"
    return binary, ""


SHAPES = {"serve": "s1", "serve-ack-at-publish": "s2", "serve-gear-envelope": "s3"}
"""The Go server's shapes and the instance name each serves under: ``serve`` acks a request once
its reply is confirmed (Gear's job: a reply lost with the server's link is asked again),
``serve-ack-at-publish`` acks it as soon as the reply is published, and ``serve-gear-envelope`` is
``serve`` with requests and replies in Gear's envelope (its type, sender, expiration and headers: the
bytes a Gear caller and server put on the wire; its client is ``client-gear-envelope``)."""


def client_command(shape: str) -> str:
    """The Go client's command for a server in ``shape``: the enveloped shape's client envelopes too."""
    return "client-gear-envelope" if shape == "serve-gear-envelope" else "client"


def server_command(binary: Path, url: str, tag: str, shape: str = "serve") -> list[str]:
    """The command line of the Go server of run ``tag`` in ``shape`` (a key of :data:`SHAPES`)."""
    return [str(binary), shape, url, EXCHANGE, f"GO{tag}.{SHAPES[shape]}"]


class GoClient:
    """The Go client process of run ``tag``: one call, or a stretch of load, per command."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc

    @classmethod
    async def start(cls, binary: Path, url: str, tag: str, shape: str = "serve") -> GoClient:
        """Start a client of the ``shape`` server of run ``tag`` and wait until it is ready.

        Raises:
            RuntimeError: it did not start.
        """
        proc = await asyncio.create_subprocess_exec(
            str(binary), client_command(shape), url, EXCHANGE, f"GO{tag}.{SHAPES[shape]}",
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, limit=LINE_LIMIT,
        )  # fmt: skip
        client = cls(proc)
        if (await client._line()) != "ready":
            raise RuntimeError("the Go client did not start")
        return client

    @property
    def pid(self) -> int:
        """The client process's id."""
        return self._proc.pid

    async def _line(self) -> str:
        assert self._proc.stdout is not None
        return (await asyncio.wait_for(self._proc.stdout.readline(), 60)).decode().strip()

    async def _ask(self, command: str) -> dict[str, Any]:
        assert self._proc.stdin is not None
        self._proc.stdin.write(command.encode() + b"\n")
        await self._proc.stdin.drain()
        answer: dict[str, Any] = json.loads(await self._line())
        return answer

    async def call(self) -> float:
        """One call; its latency in seconds, measured in Go."""
        return float((await self._ask("call"))["latency_ns"]) / 1e9

    async def load(self, concurrency: int, seconds: float) -> dict[str, Any]:
        """``concurrency`` calls in flight for ``seconds``: calls ended in time, every latency (s), and
        the client's CPU seconds."""
        got = await self._ask(f"load {concurrency} {round(seconds * 1000)}")
        return {
            "in_time": got["in_time"],
            "latencies": [ns / 1e9 for ns in got["latencies_ns"]],
            "cpu": got["cpu_ns"] / 1e9,
        }

    async def trace(self, seconds: float) -> list[list[int]]:
        """One call after another for ``seconds``: each call's ``[id, start, published, reply, end]``
        (ns on ``time.monotonic_ns``'s clock; see ``rpcbench.go``)."""
        got = await self._ask(f"trace {round(seconds * 1000)}")
        calls: list[list[int]] = got["calls"]
        return calls

    async def close(self) -> None:
        """Stop the client."""
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            await asyncio.wait_for(self._proc.wait(), 5)
        except TimeoutError:
            self._proc.kill()

"""``gear demo --serve``: the example system keeps running, and every command it prints works as printed.

The demo runs in a child process (it serves until a signal); each printed ``gear`` line runs as another
child with the ``GEAR_URL`` the demo printed, and each ``curl`` line is made with urllib (no curl
needed). Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

GEAR = [sys.executable, "-c", "from gear.cli.main import app; app()"]
START_WAIT = 60.0
COMMAND_WAIT = 60.0


@dataclass
class Demo:
    """A running ``gear demo --serve``, its stdout lines as they come, and what it printed when ready."""

    proc: subprocess.Popen[str]
    output: queue.Queue[str | None]
    lines: list[str] = field(default_factory=list)
    stopped: tuple[int, list[str], str] | None = None

    @property
    def commands(self) -> list[str]:
        """The lines under "Try, in another terminal:"."""
        start = self.lines.index("Try, in another terminal:") + 1
        found = []
        for line in self.lines[start:]:
            if not line.startswith("  "):
                break
            found.append(line.strip())
        return found

    def next_line(self, timeout: float) -> str | None:
        """The next stdout line; ``None`` at the end. Fails after ``timeout`` seconds."""
        try:
            return self.output.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"gear demo --serve printed nothing for {timeout:g}s after: {self.lines[-3:]}")

    def stop(self) -> tuple[int, list[str], str]:
        """SIGINT, then its exit code, the lines it printed after being ready, and its stderr."""
        if self.stopped is not None:
            return self.stopped
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        rest = []
        while (line := self.next_line(10)) is not None:
            rest.append(line)
        assert self.proc.stderr is not None
        self.stopped = (self.proc.returncode, rest, self.proc.stderr.read())
        return self.stopped


def _pump(stream: Any, into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line.rstrip("\n"))
    into.put(None)


@pytest.fixture
def demo() -> Iterator[Demo]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEAR_")}
    proc = subprocess.Popen(
        [*GEAR, "demo", "--serve", "--http-port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    running = Demo(proc, queue.Queue())
    threading.Thread(target=_pump, args=(proc.stdout, running.output), daemon=True).start()
    try:
        while True:
            line = running.next_line(START_WAIT)
            if line is None:
                pytest.fail(f"gear demo --serve ended early: {running.lines}")
            running.lines.append(line)
            if line.startswith("Ctrl-C stops"):
                break
        yield running
    finally:
        running.stop()


def _curl(line: str) -> Any:
    """What a printed ``curl -s [-X VERB] URL [-d BODY]`` line answers, as JSON."""
    words = shlex.split(line)[1:]
    verb, body, url = "GET", None, ""
    while words:
        word = words.pop(0)
        if word == "-X":
            verb = words.pop(0)
        elif word == "-d":
            body = words.pop(0).encode()
        elif word != "-s":
            url = word
    request = urllib.request.Request(url, data=body, method=verb)
    with urllib.request.urlopen(request, timeout=COMMAND_WAIT) as response:
        return json.loads(response.read())


def test_every_printed_command_works_until_ctrl_c(demo: Demo) -> None:
    text = "\n".join(demo.lines)
    assert "broker: Gear's reference broker" in text
    assert "WEB HTTP: http://127.0.0.1:" in text, "WEB binds loopback by default"
    commands = demo.commands
    exports = [c for c in commands if c.startswith("export GEAR_URL=")]
    assert len(exports) == 1, commands
    url = shlex.split(exports[0])[1].removeprefix("GEAR_URL=")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GEAR_")}, "GEAR_URL": url}
    assert 'gear send stateless CTRL lookup -d \'{"key":"alice"}\' --call' in commands

    outputs: dict[str, str] = {}
    for line in commands:
        if line.startswith("export "):
            continue
        if line.startswith("curl "):
            outputs[line] = json.dumps(_curl(line))
            continue
        words = shlex.split(line)
        assert words[0] == "gear", line
        done = subprocess.run(
            [*GEAR, *words[1:]], capture_output=True, text=True, env=env, timeout=COMMAND_WAIT
        )
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
        outputs[line] = done.stdout

    lookup = next(line for line in commands if " lookup " in line)
    assert '"value": "hello"' in outputs[lookup], "CTRL found what the p2p put stored"
    nodes = outputs["gear nodes"]
    for instance in ("REPO.repo1", "REPO.repo2", "REPO.repo3", "CTRL.ctrl1", "CTRL.ctrl2", "WEB.web1"):
        assert instance in nodes
    get_bob = next(line for line in commands if line.startswith("curl") and line.endswith("/items/bob"))
    assert json.loads(outputs[get_bob])["value"] == "world"

    # Ctrl-C stops it: every instance and the broker, with exit code 0 and no traceback
    code, after, err = demo.stop()
    assert code == 0, err
    assert after == ["gear demo: stopped"]
    assert "Traceback" not in err

"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``).

Only the standard library: Chromium reads JSON commands from fd 3 and writes replies and events to fd
4, each message ending in a NUL byte. Enough to load a page, collect console errors, evaluate a check
script and take a full-page screenshot.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

__all__ = ("FLAGS", "Browser", "DevToolsError", "find_chromium")

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


class DevToolsError(RuntimeError):
    """Chromium answered a command with an error (``message`` is its text)."""

    def __init__(self, method: str, error: dict[str, Any]) -> None:
        self.message = str(error.get("message", error))
        super().__init__(f"{method}: {error}")

    @property
    def page_was_navigating(self) -> bool:
        """The command ran into a navigation (the page it inspected went away): worth a retry."""
        return "navigated or closed" in self.message or "Cannot find context" in self.message


def find_chromium() -> str | None:
    """The Chromium executable on PATH (Debian's ``chromium``), or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One Chromium process with a fresh profile, one page, and the console errors it saw."""

    def __init__(self, exe: str, profile: Path, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.errors: list[str] = []
        self._events: list[dict[str, Any]] = []
        self._buffer = b""
        self._next_id = 0
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        os.set_inheritable(to_chrome_r, True)
        os.set_inheritable(from_chrome_w, True)

        def wire_fds() -> None:  # in the child: the pipe ends become fds 3 and 4
            high_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            [exe, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,  # subprocess would close fds 3 and 4 after wire_fds made them
            preexec_fn=wire_fds,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=self.session)

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_chrome], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise ConnectionError("Chromium closed the pipe")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        self._note(message)
        return message

    def _note(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
        elif method == "Runtime.exceptionThrown":
            self.errors.append(str(params.get("exceptionDetails", {}).get("text")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.errors.append(str(params["entry"].get("text")))
        if method:
            self._events.append(message)

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> Any:
        """Send one command and return its result (events that arrive meanwhile are kept)."""
        self._next_id += 1
        command: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            command["sessionId"] = session
        os.write(self._to_chrome, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            message = self._read(deadline)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise DevToolsError(method, message["error"])
                return message.get("result", {})

    def wait_event(self, method: str) -> dict[str, Any]:
        """The first event called ``method`` (already seen, or the next ones)."""
        deadline = time.monotonic() + self.timeout
        while True:
            for event in self._events:
                if event["method"] == method:
                    self._events.remove(event)
                    return event
            self._read(deadline)

    def open(self, url: str, width: int = 1280, height: int = 900) -> None:
        """Load ``url`` in the page at the given viewport size and wait for its load event."""
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        self.send("Emulation.setDeviceMetricsOverride", metrics, session=self.session)
        self.send("Page.navigate", {"url": url}, session=self.session)
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """Evaluate JavaScript in the page and return its JSON value."""
        result = self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=self.session
        )
        if "exceptionDetails" in result:
            raise RuntimeError(str(result["exceptionDetails"]))
        return result["result"].get("value")

    def screenshot(self, path: Path) -> None:
        """A PNG of the whole page."""
        size = self.send("Page.getLayoutMetrics", session=self.session)["cssContentSize"]
        shot = self.send(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": True,
             "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}},
            session=self.session,
        )  # fmt: skip
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        """Close the browser (killed if it does not exit within 10 s)."""
        with contextlib.suppress(OSError, TimeoutError, RuntimeError, ConnectionError):
            self.send("Browser.close")
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self._to_chrome)
        os.close(self._from_chrome)

"""A :class:`gear.link.stream.Stream` on fakes: a loop whose iterations and clock the test drives, a
core that always has a frame to send, and a transport that records each write."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gear.link.stream import Stream


class FakeLoop:
    """The part of an event loop a Stream uses, with a clock the test moves and callbacks it runs."""

    def __init__(self) -> None:
        self.now = 100.0
        self.soon: list[Callable[[], None]] = []

    def time(self) -> float:
        return self.now

    def call_soon(self, callback: Callable[..., None], *args: Any) -> None:
        self.soon.append(lambda: callback(*args))

    def iteration(self) -> None:
        """One loop iteration: run what was scheduled before it started."""
        due, self.soon = self.soon, []
        for callback in due:
            callback()


class FakeCore:
    has_output = False
    frames_received = 0

    def receive(self, data: bytes) -> list[Any]:
        self.frames_received += 1
        return []

    def data_to_send(self) -> bytes:
        return b"frame"


class FakeTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return False


def fake_stream(busy_poll: float, clock: Callable[[], float] | None = None) -> tuple[Stream, FakeLoop]:
    loop = FakeLoop()
    stream = Stream(
        FakeCore(),  # type: ignore[arg-type]
        loop,  # type: ignore[arg-type]
        lambda events: None,
        lambda reason: None,
        busy_poll=busy_poll,
        clock=clock or loop.time,
    )
    stream.transport = FakeTransport()  # type: ignore[assignment]
    return stream, loop

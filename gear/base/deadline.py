"""``Deadline``: when a request (or a publish's retry budget) runs out, on both clocks it needs.

A deadline is born from a timeout (``rpc.call(..., timeout=2)``), from the wire (a request's
``x-gear-deadline``, unix ms) or from the request being served (a nested call inherits it, less a
margin). Every wait is bounded on the monotonic clock (:attr:`Deadline.at`, the event loop's clock:
asyncio's and uvloop's loops both read ``CLOCK_MONOTONIC``), immune to wall-clock steps; what goes on
the wire is the absolute unix time (:attr:`Deadline.unix`), the one clock two hosts share. The two are
fixed together when the value is made, so the value reads each clock once.
"""

from __future__ import annotations

import math
import time

from gear.base.records import immutable

__all__ = ("Deadline",)


@immutable
class Deadline:
    """An expiry on the monotonic (event loop) clock and the same moment as unix seconds."""

    at: float
    """Monotonic seconds (``time.monotonic()``, the event loop's ``time()``)."""
    unix: float
    """Unix seconds: what the request carries on the wire."""

    @classmethod
    def from_timeout(cls, seconds: float, now: float | None = None) -> Deadline:
        """The deadline ``seconds`` from now; ``now``: the monotonic time now, if the caller read it
        already."""
        return cls((time.monotonic() if now is None else now) + seconds, time.time() + seconds)

    @classmethod
    def from_unix(cls, unix: float, now: float | None = None) -> Deadline:
        """The deadline at unix time ``unix`` (as another host stated it); ``now``: the unix time now,
        if the caller read it already."""
        return cls(time.monotonic() + (unix - (time.time() if now is None else now)), unix)

    @classmethod
    def from_unix_ms(cls, unix_ms: int, now: float | None = None) -> Deadline:
        """The deadline at ``unix_ms`` milliseconds since the epoch (``x-gear-deadline``)."""
        unix = unix_ms / 1000
        return cls(time.monotonic() + (unix - (time.time() if now is None else now)), unix)

    @property
    def unix_ms(self) -> int:
        """The deadline in unix milliseconds, as the wire carries it (rounded down)."""
        return int(self.unix * 1000)

    @property
    def expired(self) -> bool:
        """True once the deadline has passed."""
        return time.monotonic() >= self.at

    def remaining(self) -> float:
        """Seconds left (negative once it passed)."""
        return self.at - time.monotonic()

    def expiration_ms(self) -> int:
        """Milliseconds left, rounded up (a budget with less than a millisecond left is still a budget),
        as a message's ``expiration``; 0 or less once it passed."""
        return math.ceil((self.at - time.monotonic()) * 1000)

    def earlier(self, seconds: float) -> Deadline:
        """The deadline ``seconds`` before this one."""
        return Deadline(self.at - seconds, self.unix - seconds)

    def sooner(self, other: Deadline) -> Deadline:
        """The sooner of the two."""
        return other if other.at < self.at else self

"""Timers: calls at given times, kept in one heap, for the broker's sans-I/O core and the SDK.

Everything that happens at a time is one :class:`Timer` here. In the broker (heartbeats, handshake and
close timeouts, a queue's ``x-expires``, the head of a queue reaching its TTL, a consumer's delivery
timeout) the core runs the due ones on its injected clock (:meth:`Timers.run`), so a tick costs the
timers that are due, not a walk over every queue and connection (that walk took 27% of a core with
200,000 idle queues). In the SDK (a call's reply deadline, a publish's confirm deadline, an async
handler cancelled at its request's deadline) :class:`LoopTimers` rings them from one asyncio timer armed
for the earliest: ``asyncio.timeout`` per wait costs a context manager, a timer handle, a heap push and a
reschedule (some 30,000 CPU instructions per call, measured with callgrind), nearly always cancelled
unused a few milliseconds later.

Owners re-check their condition when their timer fires and arm a new one if it moved: state changes
never touch the heap. Cancelling is a flag; a cancelled timer stays in the heap until it comes up or
until cancelled ones are the majority, when the heap is rebuilt.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ("DueSet", "LoopTimers", "Timer", "Timers", "loop_time")

_log = logging.getLogger("gear.base.timers")
_COMPACT_AFTER = 256


class Timer:
    """One pending call; ``when`` is on the owner's clock."""

    __slots__ = ("active", "callback", "when")

    def __init__(self, when: float, callback: Callable[[], object]) -> None:
        self.when = when
        self.callback = callback
        self.active = True


class Timers:
    """Pending calls ordered by time; the owner runs the due ones (no clock, no I/O here)."""

    __slots__ = ("_cancelled", "_heap", "_log", "_order", "errors")

    def __init__(self, log: logging.Logger = _log) -> None:
        self._heap: list[tuple[float, int, Timer]] = []
        self._order = itertools.count()
        self._cancelled = 0
        self._log = log
        self.errors = 0
        """Callbacks that raised (each logged)."""

    def __len__(self) -> int:
        """Timers pending (cancelled ones not counted)."""
        return len(self._heap) - self._cancelled

    def call_at(self, when: float, callback: Callable[[], object]) -> Timer:
        """Call ``callback()`` at the first :meth:`run` at or after ``when``."""
        timer = Timer(when, callback)
        heapq.heappush(self._heap, (when, next(self._order), timer))
        return timer

    def cancel(self, timer: Timer | None) -> bool:
        """Forget ``timer``; True when it was pending (False for None, or one that ran or was cancelled)."""
        if timer is None or not timer.active:
            return False
        timer.active = False
        self._cancelled += 1
        if self._cancelled > _COMPACT_AFTER and self._cancelled * 2 > len(self._heap):
            self._heap = [item for item in self._heap if item[2].active]
            heapq.heapify(self._heap)
            self._cancelled = 0
        return True

    def clear(self) -> None:
        """Forget every timer."""
        for _, _, timer in self._heap:
            timer.active = False
        self._heap.clear()
        self._cancelled = 0

    def next_deadline(self) -> float | None:
        """When the earliest pending timer is due, or None."""
        heap = self._heap
        while heap and not heap[0][2].active:
            heapq.heappop(heap)
            self._cancelled -= 1
        return heap[0][0] if heap else None

    def run(self, now: float) -> int:
        """Call every timer due by ``now`` (not those the calls arm for ``now``: they wait for the next
        run); a callback that raises is logged and counted and the others still run. Returns how many ran.
        """
        heap = self._heap
        due: list[Timer] = []
        while heap and heap[0][0] <= now:
            timer = heapq.heappop(heap)[2]
            if timer.active:
                timer.active = False
                due.append(timer)
            else:
                self._cancelled -= 1
        for timer in due:
            try:
                timer.callback()
            except Exception:  # one owner's bug must not stop the others' timers
                self.errors += 1
                self._log.exception("timer %r failed", timer.callback)
        return len(due)


class LoopTimers(Timers):
    """:class:`Timers` on the running loop's clock, rung by one loop timer armed for the earliest."""

    __slots__ = ("_armed", "_armed_at")

    def __init__(self, log: logging.Logger = _log) -> None:
        super().__init__(log)
        self._armed: asyncio.TimerHandle | None = None
        self._armed_at = math.inf

    def call_at(self, when: float, callback: Callable[[], object]) -> Timer:
        """Call ``callback()`` at loop time ``when`` (soon, if it passed) unless cancelled first."""
        timer = Timer(when, callback)  # as Timers.call_at does, inline: it runs for every call and publish
        heapq.heappush(self._heap, (when, next(self._order), timer))
        if when < self._armed_at:
            self._arm(when)
        return timer

    def clear(self) -> None:
        """Forget every timer and stop the loop timer."""
        super().clear()
        if self._armed is not None:
            self._armed.cancel()
        self._armed = None
        self._armed_at = math.inf

    def _arm(self, when: float) -> None:
        if self._armed is not None:
            self._armed.cancel()
        self._armed = asyncio.get_running_loop().call_at(when, self._ring)
        self._armed_at = when

    def _ring(self) -> None:
        self._armed = None
        self._armed_at = math.inf
        self.run(asyncio.get_running_loop().time())
        when = self.next_deadline()
        if when is not None:
            self._arm(when)


def loop_time() -> float:
    """The running event loop's time (a :class:`DueSet`'s clock under :class:`LoopTimers`)."""
    return asyncio.get_running_loop().time()


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class DueSet(Generic[K, V]):
    """Values that fall due at a time on ``clock``, behind one timer of ``timers`` armed at the earliest:
    adding or taking one out costs a dict operation, not a timer. ``on_due(value)`` runs for each value
    whose time came (its key taken out first)."""

    __slots__ = ("_clock", "_due", "_on_due", "_timer", "_timers")

    def __init__(self, timers: Timers, clock: Callable[[], float], on_due: Callable[[V], object]) -> None:
        self._timers = timers
        self._clock = clock
        self._on_due = on_due
        self._due: dict[K, tuple[float, V]] = {}
        self._timer: Timer | None = None

    def add(self, key: K, when: float, value: V) -> None:
        """``value`` falls due at ``when`` unless ``key`` is discarded first."""
        self._due[key] = (when, value)
        armed = self._timer
        if armed is None or not armed.active or when < armed.when:
            self._timers.cancel(armed)
            self._timer = self._timers.call_at(when, self._ring)

    def discard(self, key: K) -> bool:
        """Take ``key`` out; False when it was not there (its value fell due, or it was never added)."""
        return self._due.pop(key, None) is not None

    def _ring(self) -> None:
        self._timer = None
        now = self._clock()
        following = math.inf
        for key, (when, value) in list(self._due.items()):
            if when <= now:
                del self._due[key]
                self._on_due(value)
            elif when < following:
                following = when
        if following < math.inf:
            self._timer = self._timers.call_at(following, self._ring)

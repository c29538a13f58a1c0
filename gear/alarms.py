"""Callbacks at loop times, with one loop timer for all of them.

Every call waits for its reply, and every publish for its confirm, until a deadline. ``asyncio.timeout``
per wait costs a context manager, a timer handle, a heap push and a reschedule (some 30,000 CPU
instructions per call and publish, measured with callgrind), and nearly all of them are cancelled
unused a few milliseconds later. :class:`Alarms` keeps the callbacks in a dict and their times in a
heap of plain ``(when, token)`` tuples, and arms a single loop timer for the earliest: setting an alarm
is a heap push and a dict insert, clearing it a dict pop. Cleared alarms are skipped when they come up
(and the heap is compacted when they outnumber live ones).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
from collections.abc import Callable

__all__ = ("Alarms",)

log = logging.getLogger("gear.alarms")


class Alarms:
    """Calls each callback at its loop time unless cleared first (one loop timer for all)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int]] = []
        self._callbacks: dict[int, Callable[[], object]] = {}
        self._tokens = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf

    def __len__(self) -> int:
        return len(self._callbacks)

    def set(self, when: float, callback: Callable[[], object]) -> int:
        """Call ``callback()`` at loop time ``when``; returns the token for :meth:`clear`."""
        token = next(self._tokens)
        self._callbacks[token] = callback
        heap = self._heap
        heapq.heappush(heap, (when, token))
        if len(heap) > 2 * len(self._callbacks) + 1024:
            self._compact()
        if when < self._timer_at:
            self._arm(when)
        return token

    def clear(self, token: int) -> None:
        """Forget the alarm ``token`` (a no-op once it rang)."""
        self._callbacks.pop(token, None)

    def cancel_all(self) -> None:
        """Forget every alarm and stop the timer."""
        self._callbacks.clear()
        self._heap.clear()
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._timer_at = math.inf

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_at(when, self._ring)
        self._timer_at = when

    def _ring(self) -> None:
        self._timer = None
        self._timer_at = math.inf
        heap, callbacks = self._heap, self._callbacks
        now = asyncio.get_running_loop().time()
        while heap and (heap[0][0] <= now or heap[0][1] not in callbacks):
            _, token = heapq.heappop(heap)
            callback = callbacks.pop(token, None)
            if callback is not None:
                try:
                    callback()
                except Exception:  # one broken callback must not keep the others from ringing
                    log.exception("an alarm's callback failed")
        if heap:
            self._arm(heap[0][0])

    def _compact(self) -> None:
        callbacks = self._callbacks
        self._heap = [item for item in self._heap if item[1] in callbacks]
        heapq.heapify(self._heap)

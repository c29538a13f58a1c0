"""Cancelling async handlers at their request's deadline, with one timer for all of them.

A timer per request (``asyncio.timeout``) costs a timer handle, a context manager and a reschedule on
every call, most of them cancelled unused a few milliseconds later. :class:`Deadlines` keeps the watched
tasks in a dict and their deadlines in a heap of plain ``(when, token)`` tuples, and arms a single loop
timer for the earliest one. A request that finishes only drops its dict entry; its heap item is skipped
when it comes up (and the heap is compacted when stale items outnumber live ones), so the hot path is a
heap push and two dict operations.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from typing import Any

__all__ = ("Deadlines",)


class Deadlines:
    """Cancels watched tasks whose deadline (unix time, as requests carry it) passes before they are
    released."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int]] = []
        self._tasks: dict[int, asyncio.Task[Any]] = {}
        self._fired: set[int] = set()
        self._tokens = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf

    def watch(self, task: asyncio.Task[Any], when: float) -> int:
        """Cancel ``task`` at ``when`` (unix seconds) unless :meth:`release` comes first; returns the
        token for :meth:`release`."""
        token = next(self._tokens)
        self._tasks[token] = task
        heap = self._heap
        heapq.heappush(heap, (when, token))
        if len(heap) > 2 * len(self._tasks) + 1024:
            self._compact()
        if when < self._timer_at:
            self._arm(when)
        return token

    def release(self, token: int) -> bool:
        """Stop watching; True when the deadline already fired (the task was cancelled by it)."""
        if self._tasks.pop(token, None) is not None:
            return False
        if token in self._fired:
            self._fired.discard(token)
            return True
        return False

    def __len__(self) -> int:
        return len(self._tasks)

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer = loop.call_at(loop.time() + (when - time.time()), self._fire)
        self._timer_at = when

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = math.inf
        heap, tasks = self._heap, self._tasks
        now = time.time()
        while heap and (heap[0][0] <= now or heap[0][1] not in tasks):
            _, token = heapq.heappop(heap)
            task = tasks.pop(token, None)
            if task is not None and not task.done():
                self._fired.add(token)
                task.cancel()
        if heap:
            self._arm(heap[0][0])

    def _compact(self) -> None:
        tasks = self._tasks
        self._heap = [item for item in self._heap if item[1] in tasks]
        heapq.heapify(self._heap)

"""The duplicate window: a request id seen again on this instance does not run its handler again.

Delivery is at-least-once: a connection cut requeues the requests a handler was still working on, and a
caller whose publish lost its confirm publishes the request again. Both arrive with the same request id.
The window remembers each request id until its entry expires (a call's deadline, or the handler's
``idempotency_window``): a repeat while the first run is in progress waits for that run, a repeat after
it gets the same outcome (the reply that was sent), and neither runs the handler.

Memory is bounded twice: entries leave when they expire, and past ``max_entries`` entries or
``max_bytes`` of cached replies the entry that expires first leaves early (counted in ``evicted``).

What it cannot catch: a repeat delivered to *another* instance (a round-robin ``TYPE`` queue hands a
requeued request to whichever instance is free). Handlers reached that way must be idempotent
themselves (the README shows how).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

__all__ = ("DuplicateWindow", "Outcome", "WindowEntry")

Outcome = tuple[bool, bytes]
"""``(ok, body)``: the reply a run produced."""


class WindowEntry:
    """One request id in the window: in progress (``outcome is None``, not ``done``) or settled."""

    __slots__ = ("done", "expires", "outcome", "request_id", "waiters")

    def __init__(self, request_id: str, expires: float) -> None:
        self.request_id = request_id
        self.expires = expires
        self.outcome: Outcome | None = None
        self.done = False
        self.waiters: list[asyncio.Future[Outcome | None]] | None = None


class DuplicateWindow:
    """Request ids seen recently by one service instance, with the outcome of their run.

    Args:
        max_entries: entries kept at most.
        max_bytes: reply bytes cached at most.
    """

    def __init__(self, max_entries: int = 100_000, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.evicted = 0
        """Entries dropped before they expired because the window was full."""
        self._entries: dict[str, WindowEntry] = {}
        self._expiry: list[tuple[float, int, WindowEntry]] = []
        self._order = itertools.count()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def cached_bytes(self) -> int:
        """Bytes of replies held right now."""
        return self._bytes

    def claim(self, request_id: str, expires: float, now: float) -> tuple[bool, WindowEntry]:
        """Record ``request_id`` until ``expires`` (unix seconds).

        Returns ``(True, entry)`` for the first sighting: run the handler, then :meth:`settle` the
        entry. ``(False, entry)`` for a repeat: :meth:`outcome` tells what the first run produced.
        """
        found = self._entries.get(request_id)
        if found is not None and found.expires > now:
            return False, found
        self._expire(now)
        while len(self._entries) >= self.max_entries and self._expiry:
            self._evict_first()
        entry = WindowEntry(request_id, expires)
        self._entries[request_id] = entry
        heapq.heappush(self._expiry, (expires, next(self._order), entry))
        if len(self._expiry) > 2 * self.max_entries + 64:
            self._compact()
        return True, entry

    def settle(self, entry: WindowEntry, outcome: Outcome | None) -> None:
        """The first run ended with ``outcome`` (``None``: no reply was sent, e.g. it was cancelled
        at its deadline); wake the repeats that wait for it."""
        entry.done = True
        if self._entries.get(entry.request_id) is entry:
            if outcome is None:
                del self._entries[entry.request_id]  # a later repeat may run it (if still in time)
            else:
                entry.outcome = outcome
                self._bytes += len(outcome[1])
                while self._bytes > self.max_bytes and self._expiry:
                    self._evict_first()
        waiters, entry.waiters = entry.waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(outcome)

    async def outcome(self, entry: WindowEntry) -> Outcome | None:
        """The first run's outcome, waiting for it while it is in progress (the caller bounds the wait).

        ``None`` when that run sent no reply.
        """
        if entry.done:
            return entry.outcome
        waiter: asyncio.Future[Outcome | None] = asyncio.get_running_loop().create_future()
        if entry.waiters is None:
            entry.waiters = []
        entry.waiters.append(waiter)
        return await waiter

    def _expire(self, now: float) -> None:
        heap = self._expiry
        while heap and heap[0][0] <= now:
            self._remove(heapq.heappop(heap)[2])

    def _compact(self) -> None:
        """Drop heap items whose entry already left (settled without an outcome, or replaced)."""
        self._expiry = [item for item in self._expiry if self._entries.get(item[2].request_id) is item[2]]
        heapq.heapify(self._expiry)

    def _evict_first(self) -> None:
        entry = heapq.heappop(self._expiry)[2]
        if self._remove(entry):
            self.evicted += 1

    def _remove(self, entry: WindowEntry) -> bool:
        if self._entries.get(entry.request_id) is not entry:
            return False  # settled without an outcome, or replaced by a later sighting
        del self._entries[entry.request_id]
        if entry.outcome is not None:
            self._bytes -= len(entry.outcome[1])
        return True

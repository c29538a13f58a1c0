"""The duplicate window: a request id seen again on this instance does not run its handler again.

Delivery is at-least-once: a connection cut requeues the requests a handler was still working on, and a
caller whose publish lost its confirm publishes the request again. Both arrive with the same request id.
The window remembers each request id until its entry expires (a call's deadline, or the handler's
``idempotency_window``): a repeat while the first run is in progress waits for that run, a repeat after
it gets the same outcome (the reply that was sent), and neither runs the handler.

Memory is bounded twice: entries leave when they expire, and past ``max_entries`` entries or
``max_bytes`` of cached replies the entry that expires first leaves early (counted in ``evicted``).
Entries are plain tuples of numbers, strings and bytes, which the garbage collector does not track: a
window holding a hundred thousand ids adds nothing to collection pauses.

Casts have no deadline and are remembered only with an ``idempotency_window``, with one exception:
when a link is lost, the casts taken on it lately (:data:`gear.serving.dispatch.RECENT_CASTS` at most) are
remembered for a while (their acknowledgements may never have reached the broker, which will deliver
them again), and a *redelivered* cast found there does not run again.

What it cannot catch: a repeat delivered to *another* instance (a round-robin ``TYPE`` queue hands a
requeued request to whichever instance is free). Handlers reached that way must be idempotent
themselves (the README shows how).
"""

from __future__ import annotations

import asyncio
import heapq

__all__ = ("Answer", "DuplicateWindow")

Answer = tuple[bool, bytes]
"""``(ok, body)``: the reply a run produced."""


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
        # request id -> (expires, outcome); outcome None while the first run is in progress
        self._entries: dict[str, tuple[float, Answer | None]] = {}
        self._expiry: list[tuple[float, str]] = []
        self._waiters: dict[str, list[asyncio.Future[Answer | None]]] = {}
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def cached_bytes(self) -> int:
        """Bytes of replies held right now."""
        return self._bytes

    def claim(self, request_id: str, expires: float, now: float) -> bool:
        """Record ``request_id`` until ``expires`` (unix seconds); True for its first sighting.

        After True, run the handler and :meth:`settle` with the same ``expires``; after False,
        :meth:`outcome` tells what the first run produced.
        """
        found = self._entries.get(request_id)
        if found is not None and found[0] > now:
            return False
        self._expire(now)
        while len(self._entries) >= self.max_entries and self._expiry:
            self._evict_first()
        self._entries[request_id] = (expires, None)
        heapq.heappush(self._expiry, (expires, request_id))
        if len(self._expiry) > 2 * self.max_entries + 64:
            self._compact()
        return True

    def holds(self, request_id: str, now: float) -> bool:
        """Whether ``request_id`` is remembered (and not expired) at unix time ``now``."""
        found = self._entries.get(request_id)
        return found is not None and found[0] > now

    def settle(self, request_id: str, expires: float, outcome: Answer | None) -> None:
        """The first run ended with ``outcome`` (``None``: no reply was sent, e.g. it was cancelled
        at its deadline, so the id is forgotten); wake the repeats that wait for it."""
        found = self._entries.get(request_id)
        if found is not None and found[0] == expires and found[1] is None:
            if outcome is None:
                del self._entries[request_id]
            else:
                self._entries[request_id] = (expires, outcome)
                self._bytes += len(outcome[1])
                while self._bytes > self.max_bytes and self._expiry:
                    self._evict_first()
        if self._waiters:
            for waiter in self._waiters.pop(request_id, ()):
                if not waiter.done():
                    waiter.set_result(outcome)

    async def outcome(self, request_id: str) -> Answer | None:
        """What the first run of ``request_id`` replied, waiting for it while it is in progress (the
        caller bounds the wait); ``None`` when it sent no reply or the id is no longer known."""
        found = self._entries.get(request_id)
        if found is None or found[1] is not None:
            return None if found is None else found[1]
        waiter: asyncio.Future[Answer | None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(request_id, []).append(waiter)
        try:
            return await waiter
        finally:
            waiters = self._waiters.get(request_id)
            if waiters is not None and waiter in waiters:  # given up (cancelled or timed out)
                waiters.remove(waiter)
                if not waiters:
                    del self._waiters[request_id]

    def _expire(self, now: float) -> None:
        heap = self._expiry
        while heap and heap[0][0] <= now:
            self._remove(*heapq.heappop(heap))

    def _evict_first(self) -> None:
        if self._remove(*heapq.heappop(self._expiry)):
            self.evicted += 1

    def _remove(self, expires: float, request_id: str) -> bool:
        found = self._entries.get(request_id)
        if found is None or found[0] != expires:
            return False  # settled without an outcome, or claimed again later
        del self._entries[request_id]
        if found[1] is not None:
            self._bytes -= len(found[1][1])
        return True

    def _compact(self) -> None:
        """Drop heap items whose entry already left (settled without an outcome, or claimed again)."""
        entries = self._entries
        live = [item for item in self._expiry if entries.get(item[1], (None,))[0] == item[0]]
        heapq.heapify(live)
        self._expiry = live

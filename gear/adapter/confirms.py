"""Publisher confirms of one channel, kept by Gear: sequence numbers, pending verdicts, returns.

Gear publishes pre-encoded frames (:mod:`gear.adapter.encode`) and reads the broker's ``basic.ack``,
``basic.nack`` and ``basic.return`` off the socket (:mod:`gear.adapter.decode`), so it numbers its
publishes itself, as the broker does (1, 2, 3... from ``confirm.select``; nothing else publishes on a
Gear publish channel), and settles one future per publish.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from enum import Enum

__all__ = ("ChannelClosedError", "Confirms", "Verdict")


class Verdict(Enum):
    """The broker's answer to one confirmed publish (the result of its future)."""

    ACK = "ack"
    RETURNED = "returned"
    NACKED = "nacked"


class ChannelClosedError(ConnectionError):
    """The publish channel closed, with no reason given, before the broker's verdict came."""


class Confirms:
    """The pending publishes of one confirm channel (a :class:`~gear.adapter.decode.ConfirmSink`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._last_tag = 0
        self._pending: dict[int, tuple[asyncio.Future[Verdict], str]] = {}
        self._by_message_id: dict[str, int] = {}
        self._closed: BaseException | None = None

    def __len__(self) -> int:
        return len(self._pending)

    def send(
        self, payload: bytes, message_id: str, write: Callable[[bytes], None]
    ) -> asyncio.Future[Verdict]:
        """Write one publish and return the future of its verdict.

        The sequence number, the bookkeeping and the write happen in one step with no await, so the
        broker numbers the publishes exactly as they are counted here. The future fails with the
        channel's closing exception if the channel closes first.
        """
        verdict: asyncio.Future[Verdict] = self._loop.create_future()
        if self._closed is not None:
            verdict.set_exception(self._closed)
            return verdict
        self._last_tag += 1
        self._pending[self._last_tag] = (verdict, message_id)
        self._by_message_id[message_id] = self._last_tag
        write(payload)
        return verdict

    def confirm(self, delivery_tag: int, multiple: bool, ack: bool) -> None:
        """Settle ``delivery_tag`` (and every earlier one if ``multiple``) as acked or nacked."""
        verdict = Verdict.ACK if ack else Verdict.NACKED
        if not multiple:
            self._settle(delivery_tag, verdict)
            return
        for tag in [tag for tag in self._pending if tag <= delivery_tag]:
            self._settle(tag, verdict)

    def returned(self, message_id: str | None) -> None:
        """Settle the publish with ``message_id`` as returned (its ack follows and finds nothing)."""
        tag = None if message_id is None else self._by_message_id.get(message_id)
        if tag is not None:
            self._settle(tag, Verdict.RETURNED)

    def fail_all(self, reason: BaseException | None) -> None:
        """The channel closed: fail every pending publish, and any later one, with ``reason``."""
        self._closed = reason or ChannelClosedError("the publish channel closed")
        pending, self._pending = self._pending, {}
        self._by_message_id.clear()
        for verdict, _ in pending.values():
            if not verdict.done():
                verdict.set_exception(self._closed)
                verdict.exception()  # retrieved: a caller that gave up no longer awaits it

    def _settle(self, tag: int, verdict: Verdict) -> None:
        entry = self._pending.pop(tag, None)
        if entry is None:
            return
        future, message_id = entry
        if self._by_message_id.get(message_id) == tag:
            del self._by_message_id[message_id]
        if not future.done():
            future.set_result(verdict)

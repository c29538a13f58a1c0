"""Publisher confirms of one channel: pending verdicts by sequence number, returns by message id.

The protocol core numbers the publishes of a confirm channel as the broker does (1, 2, 3... from
``confirm.select``); :class:`Confirms` keeps one future per publish and settles it from the broker's
``basic.ack``, ``basic.nack`` and ``basic.return``. RabbitMQ sends a return *before* the ack of the
same publish, so a return is matched by ``message_id`` (unique per attempt) and the ack that follows
finds nothing left to settle.
"""

from __future__ import annotations

import asyncio
from enum import Enum

from gear.amqp import ChannelClosedError, Confirm, Returned
from gear.link.connection import Channel
from gear.wire.content import Publish

__all__ = ("Confirms", "Verdict")


class Verdict(Enum):
    """The broker's answer to one confirmed publish (the result of its future)."""

    ACK = "ack"
    RETURNED = "returned"
    NACKED = "nacked"


class Confirms:
    """The pending publishes of one confirm channel (its ``confirms``: the connection's dispatch hands
    it the channel's confirms, returns and close)."""

    def __init__(self, channel: Channel) -> None:
        self._loop = asyncio.get_running_loop()
        self._channel = channel
        self._pending: dict[int, tuple[asyncio.Future[Verdict], str]] = {}
        self._by_message_id: dict[str, int] = {}
        self._closed: ChannelClosedError | None = None
        channel.confirms = self

    def __len__(self) -> int:
        return len(self._pending)

    def send(self, publish: Publish, message_id: str) -> asyncio.Future[Verdict]:
        """Publish a message and return the future of the broker's verdict.

        The write and the bookkeeping happen in one step with no await, so the sequence number is the
        one the broker gives it. The future fails with :class:`~gear.amqp.ChannelClosedError` if the
        channel closes first.

        Raises:
            FieldError: a name or property AMQP cannot carry (nothing was sent).
            ChannelClosedError: the channel is closing or closed (nothing was sent).
        """
        if self._closed is not None:
            raise self._closed
        tag = self._channel.publish(publish)
        verdict: asyncio.Future[Verdict] = self._loop.create_future()
        self._pending[tag] = (verdict, message_id)
        self._by_message_id[message_id] = tag
        return verdict

    # -- what the broker said (from the connection's dispatch) ---------------------------------------

    def confirm(self, confirm: Confirm) -> None:
        """Settle the confirmed tag (and every earlier one if ``multiple``) as acked or nacked."""
        verdict = Verdict.NACKED if confirm.nack else Verdict.ACK
        if not confirm.multiple:
            self._settle(confirm.delivery_tag, verdict)
            return
        last = confirm.delivery_tag
        for tag in [tag for tag in self._pending if tag <= last]:
            self._settle(tag, verdict)

    def returned(self, returned: Returned) -> None:
        """Settle the publish with the returned message's id as returned."""
        message_id = returned.properties.message_id
        tag = None if message_id is None else self._by_message_id.get(message_id)
        if tag is not None:
            self._settle(tag, Verdict.RETURNED)

    def closed(self, error: ChannelClosedError) -> None:
        """Fail every pending publish, and any later one, with the channel's reason."""
        self._closed = error
        pending, self._pending = self._pending, {}
        self._by_message_id.clear()
        for verdict, _ in pending.values():
            if not verdict.done():
                verdict.set_exception(error)
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

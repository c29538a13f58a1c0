"""Publishing one attempt on the confirm channel, bounded by a deadline, with the outcome as a value.

Every way an attempt can end is an :class:`Outcome`, so the layer above decides on data (retry,
republish, fail) instead of on exceptions from the client library:

==================  ========================================================================
``CONFIRMED``       the broker acked it (and routed it somewhere)
``RETURNED``        no queue was bound (``basic.return`` came before the ack)
``NACKED``          the broker refused responsibility (``basic.nack``)
``NOT_SENT``        nothing reached the socket (the channel was closed, or not free before the deadline)
``LINK_LOST``       sent, then the connection failed before the confirm: it may have been routed
``CHANNEL_CLOSED``  sent, then the broker closed the channel (a channel error, e.g. 406): maybe routed
``UNCONFIRMED``     sent, and no confirm came before the deadline: it may have been routed
==================  ========================================================================
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import aiormq.exceptions as amqp

from gear.adapter.confirms import ChannelClosedError, Confirms, Verdict
from gear.adapter.errors import describe

__all__ = ("Outcome", "PublishResult", "send")


class Outcome(StrEnum):
    """How one publish attempt ended."""

    CONFIRMED = "confirmed"
    RETURNED = "returned"
    NACKED = "nacked"
    NOT_SENT = "not_sent"
    LINK_LOST = "link_lost"
    CHANNEL_CLOSED = "channel_closed"
    UNCONFIRMED = "unconfirmed"


_MAYBE_ROUTED = frozenset({Outcome.LINK_LOST, Outcome.CHANNEL_CLOSED, Outcome.UNCONFIRMED})


@dataclass(frozen=True, slots=True)
class PublishResult:
    """The outcome of one attempt, with the broker's reply code and text where there is one."""

    outcome: Outcome
    reason: str = ""
    reply_code: int | None = None
    channel: Any = None
    """For ``NACKED``: the channel that nacked it (see ``Link.renew_publish_channel``)."""

    @property
    def maybe_routed(self) -> bool:
        """True when the broker may have taken the message although no ack was seen."""
        return self.outcome in _MAYBE_ROUTED


CONFIRMED = PublishResult(Outcome.CONFIRMED)
RETURNED = PublishResult(Outcome.RETURNED)
NACKED = PublishResult(Outcome.NACKED, "the broker nacked it")


async def send(
    channel: Any,
    confirms: Confirms | None,
    payload: bytes,
    message_id: str,
    until: float,
    write: Callable[[bytes], None],
) -> PublishResult:
    """Publish pre-encoded frames on a confirm channel (its ``confirms``) and wait for the verdict.

    Never waits past loop time ``until`` and never raises for a broker or network failure: the
    outcome says what happened. Cancellation of the calling task propagates as usual.
    """
    if confirms is None or channel.is_closed:
        return PublishResult(Outcome.NOT_SENT, "the publish channel is closed")
    sent = False
    try:
        async with asyncio.timeout_at(until):
            confirmation = confirms.send(payload, message_id, write)
            sent = True
            verdict = await confirmation
    except TimeoutError:
        if sent:
            return PublishResult(Outcome.UNCONFIRMED, "no confirm from the broker before the deadline")
        return PublishResult(Outcome.NOT_SENT, "not sent before the deadline")
    except ChannelClosedError:
        return _lost(channel, sent, None)
    except Exception as exc:  # the library's reason the channel or the connection closed
        return _lost(channel, sent, exc)
    if verdict is Verdict.ACK:
        return CONFIRMED
    if verdict is Verdict.RETURNED:
        return RETURNED
    return NACKED


def _lost(channel: Any, sent: bool, exc: BaseException | None) -> PublishResult:
    code, text = describe(exc)
    if not sent:
        return PublishResult(Outcome.NOT_SENT, text, code)
    connection_alive = not channel.connection.is_closed
    if isinstance(exc, amqp.ChannelClosed) and connection_alive:
        return PublishResult(Outcome.CHANNEL_CLOSED, text, code)
    return PublishResult(Outcome.LINK_LOST, text, code)

"""The fence: every name of aiormq's that is not public API, in one place, checked at import.

Gear uses aiormq's public API (connect, channels, declare, consume, qos, ack, close) everywhere else.
Four things it needs are not offered publicly, so this module reaches for them, and only this module:

* ``connection.blocked`` / ``unblocked`` are handled in name-mangled private methods of
  ``aiormq.Connection`` with no public hook: :class:`GearConnection` overrides them by their mangled
  names, calls the originals (aiormq's own bookkeeping still runs) and reports the frames.
* Deliveries and confirms: :mod:`gear.adapter.decode` reads them off the socket itself; for
  confirms it keeps using the channel's confirmation map (:class:`ChannelConfirms`), so a closing
  channel still fails the pending ones through aiormq's own code.
* Whether the broker has already closed a channel: aiormq records the broker's ``channel.close`` (and
  queues its ``close-ok``) before the channel object reports ``is_closed``; frames sent on that
  channel number after the ``close-ok`` would be a connection error, so :func:`channel_closing` lets
  the writer drop publishes from that moment on.
* Publishing pre-encoded frames (``gear.adapter.encode``) with aiormq's own confirm bookkeeping
  (:func:`send_publish`): the channel's delivery-tag counter, confirmation map and the message-id
  map that routes a ``basic.return`` to its pending confirm.

:func:`check_channel` verifies the per-instance attributes on the first channel of every connection;
the class-level names are verified when this module is imported. Either check fails with
:class:`UnsupportedClientError`, naming the supported versions, instead of silently misbehaving.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import aiormq

from gear.adapter.decode import Verdict

__all__ = (
    "SUPPORTED",
    "GearConnection",
    "UnsupportedClientError",
    "channel_closing",
    "check_channel",
    "ChannelConfirms",
    "send_publish",
)

SUPPORTED = "aiormq >= 7.2, < 8"
"""The aiormq versions whose private names below were read and tested."""

_ON_BLOCKED = "_Connection__handle_connection_blocked"
_ON_UNBLOCKED = "_Connection__handle_connection_unblocked"
_CLASS_NAMES = {
    aiormq.Connection: (_ON_BLOCKED, _ON_UNBLOCKED),
}
_CLOSE_REASON = "_close_exception"
_CHANNEL_ATTRIBUTES = (
    "delivery_tag",
    "confirmations",
    "message_id_delivery_tag",
    "write_queue",
    "consumers",
    _CLOSE_REASON,
)


class UnsupportedClientError(ImportError):
    """The installed aiormq lacks a name Gear relies on (a version Gear was not tested with)."""


def _installed() -> str:
    try:
        return version("aiormq")
    except Exception:  # pragma: no cover - metadata missing (vendored copy)
        return "unknown"


def _refuse(missing: str) -> UnsupportedClientError:
    return UnsupportedClientError(
        f"gear needs {SUPPORTED}; the installed aiormq {_installed()} has no {missing}. "
        f"Install a supported version: pip install 'aiormq>=7.2,<8'"
    )


def _check_classes() -> None:
    for cls, names in _CLASS_NAMES.items():
        for name in names:
            if not hasattr(cls, name):
                raise _refuse(f"{cls.__name__}.{name}")


def check_channel(channel: Any) -> None:
    """Verify the per-instance attributes Gear reads on an aiormq channel.

    Raises:
        UnsupportedClientError: one is missing.
    """
    for name in _CHANNEL_ATTRIBUTES:
        if not hasattr(channel, name):
            raise _refuse(f"Channel.{name}")


_check_classes()


class GearConnection(aiormq.Connection):
    """aiormq's connection, with ``connection.blocked`` / ``unblocked`` reported to Gear."""

    on_blocked: Callable[[str], None] | None = None
    on_unblocked: Callable[[], None] | None = None

    async def _Connection__handle_connection_blocked(self, frame: Any) -> None:  # noqa: N802
        await getattr(super(), _ON_BLOCKED)(frame)
        if self.on_blocked is not None:
            self.on_blocked(str(frame.reason or ""))

    async def _Connection__handle_connection_unblocked(self, frame: Any) -> None:  # noqa: N802
        await getattr(super(), _ON_UNBLOCKED)(frame)
        if self.on_unblocked is not None:
            self.on_unblocked()


def channel_closing(channel: Any) -> bool:
    """True once the broker closed ``channel`` (even before aiormq marks it closed)."""
    return bool(channel.is_closed or getattr(channel, _CLOSE_REASON) is not None)


class ChannelConfirms:
    """The broker's verdicts for one publish channel, settled in aiormq's confirmation map.

    Each pending publish has a future there (see :func:`send_publish`); a verdict resolves it with a
    :class:`~gear.adapter.decode.Verdict`. A ``basic.return`` comes before the ack of the same
    message: it resolves the future and the ack then finds nothing left to settle.
    """

    def __init__(self, channel: Any) -> None:
        self._confirmations: dict[int, asyncio.Future[Any]] = channel.confirmations
        self._by_message_id: dict[str, int] = channel.message_id_delivery_tag

    def confirm(self, delivery_tag: int, multiple: bool, ack: bool) -> None:
        verdict = Verdict.ACK if ack else Verdict.NACKED
        pending = self._confirmations
        if not multiple:
            self._settle(pending.pop(delivery_tag, None), verdict)
            return
        for tag in [tag for tag in pending if tag <= delivery_tag]:
            self._settle(pending.pop(tag), verdict)

    def returned(self, message_id: str | None) -> None:
        tag = None if message_id is None else self._by_message_id.get(message_id)
        if tag is not None:
            self._settle(self._confirmations.pop(tag, None), Verdict.RETURNED)

    @staticmethod
    def _settle(confirmation: asyncio.Future[Any] | None, verdict: Verdict) -> None:
        if confirmation is not None and not confirmation.done():
            confirmation.set_result(verdict)


def send_publish(
    channel: Any, payload: bytes, message_id: str, write: Callable[[bytes], None]
) -> asyncio.Future[Any]:
    """Send one pre-encoded publish on ``channel`` with ``write`` and return its confirmation future.

    The future resolves with a :class:`~gear.adapter.decode.Verdict` (set by :class:`ChannelConfirms`),
    or fails with aiormq's exception when the channel closes first. The sequence number, the
    bookkeeping and the write happen in one step with no await, so the broker sees publishes in the
    order of their sequence numbers without aiormq's channel lock or writer task (Gear publishes
    nothing else on this channel).
    """
    channel.delivery_tag += 1
    tag = channel.delivery_tag
    confirmation: asyncio.Future[Any] = channel.create_future()
    channel.confirmations[tag] = confirmation
    channel.message_id_delivery_tag[message_id] = tag

    def forget(_: Any) -> None:
        if channel.message_id_delivery_tag.get(message_id) == tag:
            del channel.message_id_delivery_tag[message_id]

    confirmation.add_done_callback(forget)
    write(payload)
    return confirmation

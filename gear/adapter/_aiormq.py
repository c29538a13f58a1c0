"""The fence: every name of aiormq's that is not public API, in one place, checked at import.

Gear uses aiormq's public API (connect, channels, declare, consume, qos, ack, close) everywhere else.
Two things it needs are not offered publicly, so this module reaches for them, and only this module:

* ``connection.blocked`` / ``unblocked`` are handled in name-mangled private methods of
  ``aiormq.Connection`` with no public hook: :class:`GearConnection` overrides them by their mangled
  names, calls the originals (aiormq's own bookkeeping still runs) and reports the frames.
* Whether the broker has already closed a channel: aiormq records the broker's ``channel.close`` (and
  queues its ``close-ok``) before the channel object reports ``is_closed``; frames sent on that
  channel number after the ``close-ok`` would be a connection error, so :func:`channel_closing` lets
  the writer drop publishes from that moment on.

:func:`check_channel` verifies the per-instance attributes on the first channel of every connection;
the class-level names are verified when this module is imported. Either check fails with
:class:`UnsupportedClientError`, naming the supported versions, instead of silently misbehaving.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import aiormq

__all__ = (
    "SUPPORTED",
    "GearConnection",
    "UnsupportedClientError",
    "channel_closing",
    "check_channel",
)

SUPPORTED = "aiormq >= 7.2, < 8"
"""The aiormq versions whose private names below were read and tested."""

_ON_BLOCKED = "_Connection__handle_connection_blocked"
_ON_UNBLOCKED = "_Connection__handle_connection_unblocked"
_CLASS_NAMES = {
    aiormq.Connection: (_ON_BLOCKED, _ON_UNBLOCKED),
}
_CLOSE_REASON = "_close_exception"
_CHANNEL_ATTRIBUTES = ("consumers", _CLOSE_REASON)


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

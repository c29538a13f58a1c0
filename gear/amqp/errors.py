"""What the client core raises: the broker broke the protocol, or closed a channel or the connection.

These stay inside Gear's link layer, which turns them into Gear's own errors and outcomes at one
place (``gear.link``); a user of Gear never catches them.
"""

from __future__ import annotations

from gear.wire.codes import reply_name

__all__ = ("ChannelClosedError", "ClosedError", "ConnectionClosedError", "ProtocolError")


class ProtocolError(Exception):
    """The broker sent something AMQP 0-9-1 does not allow; the connection is unusable.

    Attributes:
        code: the reply code the client closes the connection with (501 frame error, 502 syntax
            error, 503 command invalid, 504 channel error, 505 unexpected frame, 540 not implemented).
        text: what the broker sent, in words.
    """

    def __init__(self, code: int, text: str) -> None:
        super().__init__(f"{code} {reply_name(code)} - {text}")
        self.code = code
        self.text = text


class ClosedError(Exception):
    """A channel or the connection is closed; ``code`` and ``text`` are the reason (the broker's when
    ``by_broker``)."""

    def __init__(self, code: int, text: str, *, by_broker: bool) -> None:
        super().__init__(f"{code} {text}" if code else text)
        self.code = code
        self.text = text
        self.by_broker = by_broker


class ChannelClosedError(ClosedError):
    """The channel is closed (or closing): nothing more can be sent on it."""


class ConnectionClosedError(ClosedError):
    """The connection is closed (or closing)."""

"""The client core's errors: the broker broke the protocol (reported by ``receive`` as the connection's
close), or a channel or the connection is closed (raised when something is sent on it).

:func:`read_method` decodes the broker's methods with :mod:`gear.wire.methods` and turns what does not
decode into a :class:`ProtocolError`.

These stay inside Gear's link layer, which turns them into Gear's own errors and outcomes at one
place (``gear.link``); a user of Gear never catches them.
"""

from __future__ import annotations

from gear.wire.codes import reply_name
from gear.wire.methods import UnknownMethodError, decode_method
from gear.wire.spec import Method
from gear.wire.table import FieldError

__all__ = ("ChannelClosedError", "ClosedError", "ConnectionClosedError", "ProtocolError", "read_method")


class ProtocolError(Exception):
    """The broker sent something AMQP 0-9-1 does not allow; the connection is unusable. Raised and
    caught inside the core: ``receive`` reports it as the connection's close
    (:class:`~gear.amqp.events.ConnectionClosed` with ``code`` and the text below).

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


def read_method(data: bytes | bytearray, start: int = 0, end: int | None = None) -> Method:
    """The broker's method frame in ``data[start:end]``, decoded.

    Raises:
        ProtocolError: 540 for a method AMQP 0-9-1 does not define, 502 for one that does not decode.
    """
    try:
        return decode_method(data, start, end)
    except UnknownMethodError as exc:
        raise ProtocolError(540, str(exc)) from exc
    except FieldError as exc:
        raise ProtocolError(502, str(exc)) from exc

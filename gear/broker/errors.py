"""The one exception type for AMQP errors raised inside the broker core.

Every rule violation raises :class:`AMQPError`. The connection state machine converts it at one place:
a soft code becomes ``channel.close`` on the failing channel, a hard code (or any error on channel 0)
becomes ``connection.close``. Reply texts follow RabbitMQ: ``"NOT_FOUND - no queue 'q' in vhost '/'"``;
the codes, their names and which of them are hard are :mod:`gear.wire.codes`, shared with the client.
"""

from __future__ import annotations

from gear.wire.codes import HARD_CODES, REPLY_NAMES

__all__ = ("AMQPError", "resource")


def resource(kind: str, name: str, vhost: str) -> str:
    """RabbitMQ's way of naming a resource in reply texts: ``queue 'q' in vhost '/'``."""
    return f"{kind} '{name}' in vhost '{vhost}'"


class AMQPError(Exception):
    """An AMQP protocol error with its reply code; ``text`` already carries the ``NAME - `` prefix.

    ``class_id``/``method_id`` name the method that failed (0 when no method is to blame); the channel
    fills them in when it knows the method. An empty explanation leaves the bare name (RabbitMQ's
    text for an error that is not a protocol error: ``INTERNAL_ERROR``).
    """

    def __init__(self, code: int, explanation: str, *, class_id: int = 0, method_id: int = 0) -> None:
        self.code = code
        name = REPLY_NAMES.get(code, "ERROR")
        text = f"{name} - {explanation}" if explanation else name
        # reply-text is a shortstr: at most 255 bytes of UTF-8. A client's bytes that are not UTF-8
        # (decoded with surrogateescape) are shown escaped, "\udc80": never an error of its own.
        self.text = text.encode("utf-8", "backslashreplace")[:255].decode("utf-8", "ignore")
        self.class_id = class_id
        self.method_id = method_id
        self.detail = ""
        """More for the broker's log than the reply text tells the client."""
        super().__init__(code, self.text)

    @property
    def hard(self) -> bool:
        """True when the error closes the connection rather than just the channel."""
        return self.code in HARD_CODES

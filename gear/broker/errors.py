"""The one exception type for AMQP errors raised inside the broker core.

Every rule violation raises :class:`AMQPError`. The connection state machine converts it at one place:
a soft code becomes ``channel.close`` on the failing channel, a hard code (or any error on channel 0)
becomes ``connection.close``. Reply texts follow RabbitMQ: ``"NOT_FOUND - no queue 'q' in vhost '/'"``.
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = ("HARD_CODES", "REPLY_NAMES", "AMQPError", "resource")

#: Reply code -> constant name as it appears in reply texts.
REPLY_NAMES = MappingProxyType(
    {
        200: "OK",
        311: "CONTENT_TOO_LARGE",
        312: "NO_ROUTE",
        313: "NO_CONSUMERS",
        320: "CONNECTION_FORCED",
        402: "INVALID_PATH",
        403: "ACCESS_REFUSED",
        404: "NOT_FOUND",
        405: "RESOURCE_LOCKED",
        406: "PRECONDITION_FAILED",
        501: "FRAME_ERROR",
        502: "SYNTAX_ERROR",
        503: "COMMAND_INVALID",
        504: "CHANNEL_ERROR",
        505: "UNEXPECTED_FRAME",
        506: "RESOURCE_ERROR",
        530: "NOT_ALLOWED",
        540: "NOT_IMPLEMENTED",
        541: "INTERNAL_ERROR",
    }
)

#: Codes that close the whole connection (``rabbit_framing_amqp_0_9_1:lookup_amqp_exception``).
HARD_CODES = frozenset({320, 402, 501, 502, 503, 504, 505, 506, 530, 540, 541})


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
        # reply-text is a shortstr: at most 255 bytes of UTF-8
        self.text = text.encode("utf-8")[:255].decode("utf-8", "ignore")
        self.class_id = class_id
        self.method_id = method_id
        self.detail = ""
        """More for the broker's log than the reply text tells the client."""
        super().__init__(code, self.text)

    @property
    def hard(self) -> bool:
        """True when the error closes the connection rather than just the channel."""
        return self.code in HARD_CODES

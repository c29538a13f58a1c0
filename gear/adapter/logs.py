"""One log line per incident: aiormq's own lines about network trouble move to DEBUG.

aiormq logs a lost connection as a WARNING with two full tracebacks ("Cancelling cause reader exited
abnormally"), a broker-initiated close as an ERROR, a refused connect as an ERROR, and blocked/unblocked
and cancelled consumers as WARNINGs. Gear reports each of these itself, once, in words (which broker,
why, what happens next), so the library's versions of them are re-emitted at DEBUG on the
``gear.adapter.aiormq`` logger, tracebacks included, and nothing else of aiormq's logging changes.
"""

from __future__ import annotations

import logging

__all__ = ("install",)

_DEMOTED = (
    "Cancelling cause reader exited abnormally",
    "Unexpected connection close from remote",
    "error when creating transport",
    "Server connection %r was stuck",
    "Connection %r was blocked by",
    "Connection %r was unblocked",
    "Consumer %r cancelled by the broker",
    "Delivery tag %r confirmed %r was ignored",
    "Unhandled message %r returning",
    "Closing channel %r because RPC call %s cancelled",
    "Closing channel %r locally because RPC call %s cancelled",
)
_LOGGERS = ("aiormq.connection", "aiormq.channel")
_debug = logging.getLogger("gear.adapter.aiormq")


class _Demote(logging.Filter):
    """Drops aiormq's records about expected network events and re-logs them at DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.msg if isinstance(record.msg, str) else ""
        if not text.startswith(_DEMOTED):
            return True
        if _debug.isEnabledFor(logging.DEBUG):
            _debug.debug(
                "aiormq %s: " + text,
                record.levelname,
                *(record.args or ()),
                exc_info=record.exc_info,
            )
        return False


_FILTER = _Demote()


def install() -> None:
    """Attach the filter to aiormq's loggers (idempotent)."""
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)

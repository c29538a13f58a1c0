"""The shapes of what is traced: messages published and delivered, and a request's Gear properties.

Structural types (Protocols), so the tracing package depends on no SDK module: the SDK's ``Outgoing``,
``Delivery`` and ``Meta`` fit them.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, Protocol

__all__ = ("DeliveredMessage", "OutgoingMessage", "RequestMeta", "type_of")


class OutgoingMessage(Protocol):
    """One logical message being published (the SDK's ``Outgoing``)."""

    @property
    def routing_key(self) -> str: ...
    @property
    def request_id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def body(self) -> bytes: ...
    @property
    def trace_id(self) -> str | None: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def deadline_unix(self) -> float | None: ...
    @property
    def headers(self) -> MutableMapping[str, Any]: ...


class DeliveredMessage(Protocol):
    """One message taken from a queue (the link's ``Delivery``)."""

    @property
    def body(self) -> bytes: ...
    @property
    def queue(self) -> str: ...
    @property
    def routing_key(self) -> str: ...
    @property
    def delivery_tag(self) -> int: ...
    @property
    def redelivered(self) -> bool: ...
    @property
    def message_id(self) -> str | None: ...


class RequestMeta(Protocol):
    """The Gear properties of a delivered message (the envelope's ``Meta``)."""

    @property
    def kind(self) -> str: ...
    @property
    def request_id(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def sender(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def trace_id(self) -> str | None: ...
    @property
    def parent_id(self) -> str | None: ...


def type_of(address: str) -> str:
    """The TYPE word of ``TYPE``, ``TYPE.HOST`` or ``TYPE.*``; ``*`` for broadcast."""
    head = address.partition(".")[0]
    return "*" if head in ("*", "@all") else head

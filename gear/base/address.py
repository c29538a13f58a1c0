"""Addresses and their wire mapping.

A Gear address names who should receive a message. There are four forms:

==============  ==============  ==========================  ==================================
address         form            routing key on the wire     who receives it
==============  ==============  ==========================  ==================================
``REPO.host2``  point-to-point  ``REPO.host2``              exactly that instance
``CTRL``        stateless       ``CTRL``                    one CTRL instance, round-robin
``CTRL.*``      multicast       ``CTRL.@all``               every CTRL instance, once each
``*.*``         broadcast       ``@all.@all``               every instance of every type, once
==============  ==============  ==========================  ==================================

Why not publish ``CTRL.*`` as the routing key? In a topic exchange ``*`` is a pattern only in a *binding*
key; a routing key is literal. Any binding that matches the literal key ``CTRL.*`` (``CTRL.*`` or ``*.*``)
also matches ``CTRL.host2``, so a point-to-point message would reach every CTRL instance. Gear therefore
publishes wildcard-free keys and binds each queue to literal keys only:

* the shared queue ``TYPE`` is bound to ``TYPE``;
* the instance queue ``TYPE.HOST`` is bound to ``TYPE.HOST``, ``TYPE.@all`` and ``@all.@all``.

``@all`` can never be a TYPE or a HOST (both are validated), so routing is exact. The exchange stays a
topic exchange so that operators can tap traffic with their own pattern bindings (``#``, ``REPO.#``).
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from enum import StrEnum

__all__ = (
    "ALL_WORD",
    "MAX_ROUTING_KEY_BYTES",
    "Address",
    "Route",
    "default_host",
    "instance_bindings",
    "validate_host",
    "validate_type",
)

ALL_WORD = "@all"
"""The reserved routing-key word that stands for "every TYPE" or "every HOST"."""

MAX_ROUTING_KEY_BYTES = 255
"""AMQP short strings, routing keys included, are limited to 255 bytes of UTF-8."""

_TYPE_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_HOST_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")


class Route(StrEnum):
    """The four routing forms, named as trace events and the README name them."""

    TYPE_HOST = "type_host"
    TYPE = "type"
    TYPE_ALL = "type_all"
    ALL = "all"


def validate_type(value: str) -> str:
    """Return ``value`` if it is a valid service TYPE.

    Raises:
        ValueError: if it is empty, contains a dot, a wildcard or another character outside
            ``[A-Za-z0-9_-]``, or does not start with a letter.
    """
    if not isinstance(value, str) or not _TYPE_RE.fullmatch(value):
        raise ValueError(
            f"invalid service TYPE {value!r}: use letters, digits, '_' or '-', starting with a letter"
        )
    return value


def validate_host(value: str) -> str:
    """Return ``value`` if it is a valid HOST word.

    Raises:
        ValueError: if it is empty, contains a dot, a wildcard, ``@`` or another character outside
            ``[A-Za-z0-9_-]``, or starts with ``-``.
    """
    if not isinstance(value, str) or not _HOST_RE.fullmatch(value):
        raise ValueError(
            f"invalid HOST {value!r}: use letters, digits, '_' or '-' (no dots; "
            "pass the short host name, e.g. 'web1' rather than 'web1.example.com')"
        )
    return value


def default_host() -> str:
    """The machine's short host name, made into a valid HOST word."""
    short = socket.gethostname().split(".", 1)[0]
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "-", short).lstrip("-")
    return cleaned or "localhost"


def _check_length(key: str) -> None:
    size = len(key.encode("utf-8"))
    if size > MAX_ROUTING_KEY_BYTES:
        raise ValueError(f"routing key {key[:40]!r}... is {size} bytes; AMQP allows {MAX_ROUTING_KEY_BYTES}")


@dataclass(frozen=True, slots=True)
class Address:
    """A parsed Gear address: ``TYPE.HOST``, ``TYPE``, ``TYPE.*`` or ``*.*``.

    ``type`` and ``host`` are ``None`` where the address means "all".
    """

    type: str | None
    host: str | None

    @classmethod
    def parse(cls, text: str) -> Address:
        """Parse an address string.

        Raises:
            ValueError: for anything but the four forms, an invalid TYPE or HOST, or a routing key
                longer than 255 bytes.
        """
        if not isinstance(text, str):
            raise ValueError(f"an address is a string, not {type(text).__name__}")
        if text == "*.*":
            return cls(None, None)
        parts = text.split(".")
        if len(parts) == 1:
            address = cls(validate_type(parts[0]), None)
        elif len(parts) == 2 and parts[1] == "*":
            address = cls(validate_type(parts[0]), ALL_WORD)
        elif len(parts) == 2:
            address = cls(validate_type(parts[0]), validate_host(parts[1]))
        else:
            raise ValueError(f"invalid address {text!r}: expected TYPE.HOST, TYPE, TYPE.* or *.*")
        _check_length(address.routing_key)
        return address

    @classmethod
    def instance(cls, type_: str, host: str) -> Address:
        """The point-to-point address of one instance.

        Raises:
            ValueError: if ``type_`` or ``host`` is invalid.
        """
        address = cls(validate_type(type_), validate_host(host))
        _check_length(address.routing_key)
        return address

    @property
    def route(self) -> Route:
        """Which of the four forms this address is."""
        if self.type is None:
            return Route.ALL
        if self.host is None:
            return Route.TYPE
        if self.host == ALL_WORD:
            return Route.TYPE_ALL
        return Route.TYPE_HOST

    @property
    def routing_key(self) -> str:
        """The wildcard-free routing key this address is published with."""
        if self.type is None:
            return f"{ALL_WORD}.{ALL_WORD}"
        if self.host is None:
            return self.type
        return f"{self.type}.{self.host}"

    @property
    def is_fanout(self) -> bool:
        """True for multicast and broadcast, where several instances may answer."""
        return self.route in (Route.TYPE_ALL, Route.ALL)

    def __str__(self) -> str:
        if self.type is None:
            return "*.*"
        if self.host is None:
            return self.type
        if self.host == ALL_WORD:
            return f"{self.type}.*"
        return f"{self.type}.{self.host}"


def instance_bindings(type_: str, host: str) -> tuple[str, ...]:
    """The literal binding keys of the ``TYPE.HOST`` queue: point-to-point, multicast, broadcast.

    Raises:
        ValueError: if ``type_`` or ``host`` is invalid.
    """
    own = Address.instance(type_, host)
    return (own.routing_key, f"{own.type}.{ALL_WORD}", f"{ALL_WORD}.{ALL_WORD}")

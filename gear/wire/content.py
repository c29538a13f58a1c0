"""A message's frames in one go: a :class:`Publish` (client), a delivery or any content (broker).

A message on the wire is a method frame (``basic.publish``, ``deliver``, ``return`` or ``get-ok``),
a content header (class 60, body size, the property list) and body frames of at most ``frame_max -
8`` bytes. Each function here returns the whole message as one buffer (one body frame, the common
case, joined without an intermediate list); the property list is either encoded from a
:class:`~gear.wire.properties.Properties` or, at the broker, the publisher's bytes forwarded as they
came.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from gear.wire.frames import FRAME_BODY, FRAME_HEADER, frame
from gear.wire.methods import deliver_parts, names
from gear.wire.properties import Properties, encode_properties

__all__ = ("Publish", "content_frames", "delivery", "encode_publish")

_HEAD = struct.Struct(">BHI")
_CONTENT_HEAD = struct.Struct(">HHQ")
_PUBLISH_PREFIX = b"\x00\x3c\x00\x28\x00\x00"  # basic.publish, reserved ticket 0
_END = b"\xce"


@dataclass(slots=True)
class Publish:
    """One message to publish: ``basic.publish``'s arguments, the properties and the body."""

    exchange: str
    routing_key: str
    properties: Properties
    body: bytes
    mandatory: bool = False


def encode_publish(channel: int, publish: Publish, frame_max: int) -> bytes:
    """The frames of ``publish`` on ``channel``: method, content header, body frames.

    Raises:
        FieldError: a name or property over 255 bytes, a header value AMQP cannot carry.
    """
    method = (
        _PUBLISH_PREFIX
        + names(publish.exchange, publish.routing_key)
        + (b"\x01" if publish.mandatory else b"\x00")
    )
    body = publish.body
    size = len(body)
    header = _CONTENT_HEAD.pack(60, 0, size) + encode_properties(publish.properties)
    if 0 < size <= frame_max - 8:  # the common case: one body frame
        return b"".join(
            (
                _HEAD.pack(1, channel, len(method)), method, _END,
                _HEAD.pack(2, channel, len(header)), header, _END,
                _HEAD.pack(3, channel, size), body, _END,
            )
        )  # fmt: skip
    parts: list[bytes | memoryview] = [
        _HEAD.pack(1, channel, len(method)),
        method,
        _END,
        _HEAD.pack(2, channel, len(header)),
        header,
        _END,
    ]
    view = memoryview(body)
    chunk = frame_max - 8
    for start in range(0, size, chunk):
        part = view[start : start + chunk]
        parts += [_HEAD.pack(3, channel, len(part)), part, _END]
    return b"".join(parts)


def content_frames(channel: int, properties: bytes, body: bytes, frame_max: int) -> list[bytes]:
    """The content header (with the encoded property list) and the body frames, split at ``frame_max - 8``."""
    parts = [frame(FRAME_HEADER, channel, _CONTENT_HEAD.pack(60, 0, len(body)) + properties)]
    chunk = frame_max - 8
    if len(body) <= chunk:
        if body:
            parts.append(frame(FRAME_BODY, channel, body))
    else:
        for start in range(0, len(body), chunk):
            parts.append(frame(FRAME_BODY, channel, body[start : start + chunk]))
    return parts


def delivery(
    channel: int,
    consumer_tag: str,
    delivery_tag: int,
    redelivered: bool,
    exchange: str,
    routing_key: str,
    properties: bytes,
    body: bytes,
    frame_max: int,
) -> bytes:
    """``basic.deliver`` with its content header and body frames, as one buffer (a broker's hottest
    output); ``properties`` is the encoded property list."""
    method = deliver_parts(channel, consumer_tag, delivery_tag, redelivered, exchange, routing_key)
    if not body or len(body) > frame_max - 8:
        return b"".join(method) + b"".join(content_frames(channel, properties, body, frame_max))
    return b"".join(
        (
            *method,
            _HEAD.pack(FRAME_HEADER, channel, 12 + len(properties)),
            _CONTENT_HEAD.pack(60, 0, len(body)),
            properties,
            _END,
            _HEAD.pack(FRAME_BODY, channel, len(body)),
            body,
            _END,
        )
    )

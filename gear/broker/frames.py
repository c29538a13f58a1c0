"""Framing: split an inbound byte stream into frames, and build outbound frames.

pamqp cannot tell "need more bytes" from "garbage", so the broker does its own framing: read the
7-byte header, check the size against the negotiated ``frame_max`` (RabbitMQ allows 8 bytes of slack),
then check the frame-end octet. Violations are hard 501 FRAME_ERRORs.
"""

from __future__ import annotations

import struct
from typing import Final

from gear.broker.errors import AMQPError

__all__ = (
    "FRAME_BODY",
    "FRAME_END",
    "FRAME_HEADER",
    "FRAME_HEARTBEAT",
    "FRAME_METHOD",
    "HEARTBEAT_FRAME",
    "PROTOCOL_HEADER",
    "FrameReader",
    "frame",
)

FRAME_METHOD: Final = 1
FRAME_HEADER: Final = 2
FRAME_BODY: Final = 3
FRAME_HEARTBEAT: Final = 8
FRAME_END: Final = 0xCE
PROTOCOL_HEADER: Final = b"AMQP\x00\x00\x09\x01"
HEARTBEAT_FRAME: Final = b"\x08\x00\x00\x00\x00\x00\x00\xce"
_FRAME_SIZE_FUDGE: Final = 8
_FRAME_OVERHEAD: Final = 8
_HEAD = struct.Struct(">BHI")
_END = b"\xce"


def frame(frame_type: int, channel: int, payload: bytes) -> bytes:
    """One complete frame."""
    return _HEAD.pack(frame_type, channel, len(payload)) + payload + _END


class FrameReader:
    """Accumulates bytes and hands out complete ``(type, channel, payload)`` frames.

    ``frame_max`` starts at 4096 (the pre-tune limit) and is raised once tune-ok is accepted.
    When everything received so far was handed out, the next read is kept as the ``bytes`` it came
    in (no copy into a bytearray), so each payload is sliced out with a single copy.
    """

    __slots__ = ("_buf", "_pos", "frame_max", "handed_out")

    def __init__(self, frame_max: int = 4096) -> None:
        self._buf: bytes | bytearray = b""
        self._pos = 0
        self.frame_max = frame_max
        self.handed_out = 0
        """Bytes handed out since the reader was made (frames and the protocol header)."""

    def feed(self, data: bytes) -> None:
        """Append received bytes."""
        buf, pos = self._buf, self._pos
        if pos >= len(buf):
            self._buf = bytes(data)
        elif isinstance(buf, bytearray):
            if pos:
                del buf[:pos]
            buf += data
        else:
            self._buf = bytearray(memoryview(buf)[pos:]) + data
        self._pos = 0

    @property
    def buffered(self) -> int:
        """Bytes received but not yet handed out."""
        return len(self._buf) - self._pos

    def discard(self) -> None:
        """Drop everything buffered (the stream cannot be trusted any more)."""
        self._buf = b""
        self._pos = 0

    def peek(self, count: int) -> bytes:
        """Up to ``count`` buffered bytes, without consuming them."""
        return bytes(self._buf[self._pos : self._pos + count])

    def take(self, count: int) -> bytes | None:
        """The next ``count`` raw bytes (the protocol header), or None if not all arrived yet."""
        if self.buffered < count:
            return None
        data = bytes(self._buf[self._pos : self._pos + count])
        self._pos += count
        self.handed_out += count
        return data

    def next_frame(self) -> tuple[int, int, bytes] | None:
        """The next complete frame, or None when more bytes are needed.

        Raises:
            AMQPError: 501 for an oversized frame, a bad frame-end octet or an unknown frame type.
        """
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 7:
            return None
        ftype, channel, size = _HEAD.unpack_from(buf, pos)
        if ftype not in (FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT):
            raise AMQPError(501, f"unknown frame type {ftype}")
        if size > self.frame_max - _FRAME_OVERHEAD + _FRAME_SIZE_FUDGE:
            raise AMQPError(501, f"frame size {size} is larger than negotiated maximum {self.frame_max}")
        end = pos + 7 + size
        if len(buf) <= end:
            return None
        if buf[end] != FRAME_END:
            raise AMQPError(501, f"frame end octet should be 0xCE, got {buf[end]:#04x}")
        payload = buf[pos + 7 : end]
        if type(payload) is not bytes:
            payload = bytes(payload)
        self._pos = end + 1
        self.handed_out += end + 1 - pos
        return ftype, channel, payload

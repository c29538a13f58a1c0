"""Framing: split an inbound byte stream into frames, and build outbound frames.

A frame is ``type (1) | channel (2) | size (4) | payload (size) | 0xCE``. pamqp cannot tell "need more
bytes" from "garbage", so both ends do their own framing: read the 7-byte header, check the type and
the size against the negotiated ``frame_max`` (RabbitMQ allows 8 bytes of slack) before buffering
the payload, then check the frame-end octet. A violation is a :class:`FrameError` (501 FRAME_ERROR):
the stream cannot be trusted past it, so the connection must close.
"""

from __future__ import annotations

import struct
from typing import Final

__all__ = (
    "FRAME_BODY",
    "FRAME_END",
    "FRAME_HEADER",
    "FRAME_HEARTBEAT",
    "FRAME_METHOD",
    "HEARTBEAT_FRAME",
    "PROTOCOL_HEADER",
    "FrameError",
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
_KINDS: Final = frozenset({FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT})
_HEAD = struct.Struct(">BHI")
_END = b"\xce"


class FrameError(Exception):
    """The byte stream breaks AMQP framing (reply code 501); ``text`` says what was received."""

    code = 501

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def frame(frame_type: int, channel: int, payload: bytes) -> bytes:
    """One complete frame."""
    return _HEAD.pack(frame_type, channel, len(payload)) + payload + _END


class FrameReader:
    """Accumulates bytes and hands out complete ``(type, channel, payload)`` frames.

    Never holds more than one frame's worth of bytes past what was handed out: a frame header that
    announces more than ``frame_max`` is refused before its payload is awaited. When everything
    received so far was handed out, the next read is kept as the ``bytes`` it came in (no copy into a
    bytearray), so each payload is sliced out with a single copy.
    """

    __slots__ = ("_pos", "buffer", "frame_max")

    def __init__(self, frame_max: int = 4096) -> None:
        self.buffer: bytes | bytearray = b""
        """What :meth:`next_span` offsets point into (valid until the next :meth:`feed` or
        :meth:`discard`; a plain attribute, read once per frame by both protocol cores)."""
        self._pos = 0
        self.frame_max = frame_max
        """The largest frame accepted, header and end octet included (raised once tune is done)."""

    def feed(self, data: bytes) -> None:
        """Append received bytes."""
        buf, pos = self.buffer, self._pos
        if pos >= len(buf):
            self.buffer = bytes(data)
        elif isinstance(buf, bytearray):
            if pos:
                del buf[:pos]
            buf += data
        else:
            self.buffer = bytearray(memoryview(buf)[pos:]) + data
        self._pos = 0

    @property
    def buffered(self) -> int:
        """Bytes received but not yet handed out."""
        return len(self.buffer) - self._pos

    def discard(self) -> None:
        """Drop everything buffered (the stream cannot be trusted any more)."""
        self.buffer = b""
        self._pos = 0

    def peek(self, count: int) -> bytes:
        """Up to ``count`` buffered bytes, without consuming them."""
        return bytes(self.buffer[self._pos : self._pos + count])

    def take(self, count: int) -> bytes | None:
        """The next ``count`` raw bytes (a protocol header), or None if not all arrived yet."""
        if self.buffered < count:
            return None
        data = bytes(self.buffer[self._pos : self._pos + count])
        self._pos += count
        return data

    def next_frame(self) -> tuple[int, int, bytes] | None:
        """The next complete frame, or None when more bytes are needed.

        Raises:
            FrameError: an unknown frame type, a frame over ``frame_max``, or a bad frame-end octet.
        """
        span = self.next_span()
        if span is None:
            return None
        ftype, channel, start, end = span
        payload = self.buffer[start:end]
        if type(payload) is not bytes:
            payload = bytes(payload)
        return ftype, channel, payload

    def next_span(self) -> tuple[int, int, int, int] | None:
        """The next complete frame as ``(type, channel, start, end)``: its payload is
        ``buffer[start:end]``, not copied (for a parser that reads fields in place). None when more
        bytes are needed.

        Raises:
            FrameError: an unknown frame type, a frame over ``frame_max``, or a bad frame-end octet.
        """
        buf, pos = self.buffer, self._pos
        if len(buf) - pos < 7:
            return None
        ftype, channel, size = _HEAD.unpack_from(buf, pos)
        if ftype not in _KINDS:
            raise FrameError(f"unknown frame type {ftype}")
        if size > self.frame_max - _FRAME_OVERHEAD + _FRAME_SIZE_FUDGE:
            raise FrameError(f"frame size {size} is larger than negotiated maximum {self.frame_max}")
        end = pos + 7 + size
        if len(buf) <= end:
            return None
        if buf[end] != FRAME_END:
            raise FrameError(f"frame end octet should be 0xCE, got {buf[end]:#04x}")
        self._pos = end + 1
        return ftype, channel, pos + 7, end

"""Record encoding for the message store: pure functions over bytes, no I/O.

Two kinds of file hold records:

* **segments** (``msg/NNNNNNNN.seg``) hold messages. A message record is
  ``length:u32 crc:u32 id:u64`` followed by ``length`` bytes of payload (exchange, routing key,
  properties, body, each length-prefixed). ``crc`` is CRC-32 of the id and the payload.
* **the queue journal** (``queues.log``) holds fixed-size queue records
  ``op:u8 queue:u64 message:u64 crc:u32``: a message entered a queue, was delivered, or left it.

A torn write (a crash in the middle of an append) leaves a record whose length runs past the end of
the file or whose CRC does not match; scanning stops there and reports the valid length.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = (
    "JOURNAL_RECORD",
    "MESSAGE_HEADER",
    "OP_ACK",
    "OP_DELIVER",
    "OP_ENQUEUE",
    "StoredMessage",
    "decode_envelope",
    "decode_payload",
    "encode_journal",
    "encode_message",
    "encode_payload",
    "scan_journal",
    "scan_segment",
)

_HEADER = struct.Struct(">IIQ")
_JOURNAL = struct.Struct(">BQQI")
_LENGTHS = struct.Struct(">HHII")
MESSAGE_HEADER = _HEADER.size
"""Bytes in front of each message payload."""
JOURNAL_RECORD = _JOURNAL.size
"""Bytes per journal record."""

OP_ENQUEUE = 1
OP_DELIVER = 2
OP_ACK = 3
_OPS = (OP_ENQUEUE, OP_DELIVER, OP_ACK)


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as the store keeps it."""

    exchange: str
    routing_key: str
    properties: bytes
    body: bytes


def encode_payload(message: StoredMessage) -> bytes:
    """The payload bytes of ``message``."""
    exchange = message.exchange.encode()
    key = message.routing_key.encode()
    lengths = _LENGTHS.pack(len(exchange), len(key), len(message.properties), len(message.body))
    return b"".join((lengths, exchange, key, message.properties, message.body))


def decode_payload(payload: bytes | memoryview) -> StoredMessage:
    """Inverse of :func:`encode_payload`.

    Raises:
        ValueError: the payload is shorter than its lengths say.
    """
    ex_len, key_len, props_len, body_len = _LENGTHS.unpack_from(payload, 0)
    pos = _LENGTHS.size
    end = pos + ex_len + key_len + props_len + body_len
    if end != len(payload):
        raise ValueError(f"payload of {len(payload)} bytes does not match its lengths ({end})")
    view = memoryview(payload)
    exchange = bytes(view[pos : pos + ex_len]).decode()
    pos += ex_len
    key = bytes(view[pos : pos + key_len]).decode()
    pos += key_len
    props = bytes(view[pos : pos + props_len])
    pos += props_len
    return StoredMessage(exchange, key, props, bytes(view[pos:end]))


def decode_envelope(data: bytes | memoryview, offset: int) -> tuple[str, str, bytes, int]:
    """Exchange, routing key, properties and body length of the record at ``offset`` (body not copied)."""
    pos = offset + MESSAGE_HEADER
    ex_len, key_len, props_len, body_len = _LENGTHS.unpack_from(data, pos)
    pos += _LENGTHS.size
    view = memoryview(data)
    exchange = str(view[pos : pos + ex_len], "utf-8")
    pos += ex_len
    key = str(view[pos : pos + key_len], "utf-8")
    pos += key_len
    return exchange, key, bytes(view[pos : pos + props_len]), body_len


def encode_message(message_id: int, payload: bytes) -> bytes:
    """A whole segment record: header and payload."""
    crc = zlib.crc32(payload, zlib.crc32(message_id.to_bytes(8, "big")))
    return _HEADER.pack(len(payload), crc, message_id) + payload


def scan_segment(data: bytes | memoryview, *, check: bool = True) -> tuple[list[tuple[int, int, int]], int]:
    """Parse a segment's records.

    Returns ``([(message_id, offset, record_size), ...], valid_length)``: scanning stops at the first
    record that is cut short or (with ``check``) fails its CRC, and ``valid_length`` is where it stopped.
    """
    found: list[tuple[int, int, int]] = []
    unpack = _HEADER.unpack_from
    crc32 = zlib.crc32
    view = memoryview(data)
    size = len(view)
    pos = 0
    while pos + MESSAGE_HEADER <= size:
        length, crc, message_id = unpack(view, pos)
        end = pos + MESSAGE_HEADER + length
        if end > size or length < _LENGTHS.size:
            break
        if check and crc32(view[pos + MESSAGE_HEADER : end], crc32(view[pos + 8 : pos + 16])) != crc:
            break
        found.append((message_id, pos, end - pos))
        pos = end
    return found, pos


def encode_journal(op: int, queue: int, message_id: int) -> bytes:
    """One journal record."""
    body = struct.pack(">BQQ", op, queue, message_id)
    return body + zlib.crc32(body).to_bytes(4, "big")


def scan_journal(data: bytes | memoryview) -> tuple[Iterator[tuple[int, int, int]], int]:
    """Parse journal records; returns an iterator of ``(op, queue, message_id)`` and the valid length.

    Scanning stops at a cut-short record or one whose CRC or op is wrong.
    """
    view = memoryview(data)
    crc32 = zlib.crc32
    size = len(view) - len(view) % JOURNAL_RECORD
    records: list[tuple[int, int, int]] = []
    pos = 0
    for op, queue, message_id, crc in _JOURNAL.iter_unpack(view[:size]):
        if op not in _OPS or crc32(view[pos : pos + JOURNAL_RECORD - 4]) != crc:
            break
        records.append((op, queue, message_id))
        pos += JOURNAL_RECORD
    return iter(records), pos

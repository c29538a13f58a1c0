"""Record encoding for the message store: pure functions over bytes, no I/O.

Both kinds of file are sequences of **blocks**, one per write-out (a group commit appends one block
per file): ``magic:u32 length:u32 crc:u32`` then ``length`` bytes of records, ``crc`` being CRC-32 of
those bytes. A crash in the middle of an append leaves a last block that is cut short or fails its
CRC; scanning stops there and reports the valid length, so a torn write is dropped whole (nothing in
it was confirmed: confirms wait for the fsync that follows the append).

* **segments** (``msg/NNNNNNNN.seg``) hold message records ``length:u32 id:u64`` then ``length``
  bytes of payload (exchange, routing key, properties, body, each length-prefixed). A message is
  addressed by the file offset and size of its record.
* **the queue journal** (``queues.log``) holds fixed-size records ``op:u8 queue:u64 message:u64``:
  a message entered a queue, was delivered, or left it.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

__all__ = (
    "BLOCK_HEADER",
    "JOURNAL_RECORD",
    "MESSAGE_HEADER",
    "OP_ACK",
    "OP_DELIVER",
    "OP_ENQUEUE",
    "StoredMessage",
    "decode_payload",
    "encode_journal",
    "encode_message",
    "encode_payload",
    "open_block",
    "scan_blocks",
    "scan_journal",
    "scan_segment",
    "seal_block",
)

_BLOCK = struct.Struct(">III")
_MAGIC = 0x47454152  # "GEAR"
_HEADER = struct.Struct(">IQ")
_JOURNAL = struct.Struct(">BQQ")
_LENGTHS = struct.Struct(">HHII")
BLOCK_HEADER = _BLOCK.size
"""Bytes in front of each block."""
MESSAGE_HEADER = _HEADER.size
"""Bytes in front of each message payload."""
JOURNAL_RECORD = _JOURNAL.size
"""Bytes per journal record."""

OP_ENQUEUE = 1
OP_DELIVER = 2
OP_ACK = 3


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as the store keeps it."""

    exchange: str
    routing_key: str
    properties: bytes
    body: bytes


# -- blocks ---------------------------------------------------------------------------------------
def open_block(buffer: bytearray) -> None:
    """Start a block in an empty ``buffer`` (a header placeholder, filled by :func:`seal_block`)."""
    buffer += bytes(BLOCK_HEADER)


def seal_block(buffer: bytearray) -> None:
    """Fill in the header of the block ``buffer`` holds."""
    body = memoryview(buffer)[BLOCK_HEADER:]
    _BLOCK.pack_into(buffer, 0, _MAGIC, len(body), zlib.crc32(body))
    body.release()


def _block_at(view: memoryview, pos: int) -> tuple[int, int] | None:
    """The records' ``(start, end)`` if an intact block starts at ``pos``."""
    if pos + BLOCK_HEADER > len(view):
        return None
    magic, length, crc = _BLOCK.unpack_from(view, pos)
    start = pos + BLOCK_HEADER
    end = start + length
    if magic != _MAGIC or end > len(view) or zlib.crc32(view[start:end]) != crc:
        return None
    return start, end


def scan_blocks(data: bytes | memoryview) -> tuple[list[tuple[int, int]], list[tuple[int, int]], int]:
    """Find the intact blocks, skipping damaged stretches.

    Returns ``(blocks, damaged, valid)``: the ``(start, end)`` of each intact block's records, the
    ``(start, end)`` byte ranges between intact blocks that are damaged, and where the last intact
    block ends (what follows it is a torn or damaged tail).
    """
    view = memoryview(data)
    raw = bytes(view) if not isinstance(data, bytes) else data
    marker = _MAGIC.to_bytes(4, "big")
    blocks: list[tuple[int, int]] = []
    damaged: list[tuple[int, int]] = []
    pos = valid = 0
    while pos < len(view):
        found = _block_at(view, pos)
        if found is None:  # damage: look for the next intact block
            bad = pos
            pos = raw.find(marker, pos + 1)
            while pos != -1 and _block_at(view, pos) is None:
                pos = raw.find(marker, pos + 1)
            if pos == -1:
                break
            damaged.append((bad, pos))
            continue
        blocks.append(found)
        pos = valid = found[1]
    return blocks, damaged, valid


# -- messages -------------------------------------------------------------------------------------
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
    exchange = str(view[pos : pos + ex_len], "utf-8")
    pos += ex_len
    key = str(view[pos : pos + key_len], "utf-8")
    pos += key_len
    props = bytes(view[pos : pos + props_len])
    pos += props_len
    return StoredMessage(exchange, key, props, bytes(view[pos:end]))


def encode_message(message_id: int, payload: bytes) -> bytes:
    """One message record: header and payload."""
    return _HEADER.pack(len(payload), message_id) + payload


Envelope = tuple[str, str, bytes, int]
"""Exchange, routing key, properties and body size of a stored message."""


def scan_segment(
    data: bytes | memoryview, wanted: dict[int, int] | None = None
) -> tuple[list[tuple[int, int, int]], dict[int, Envelope], int, list[tuple[int, int]], int]:
    """Parse a segment's intact blocks.

    Returns ``(records, envelopes, top, damaged, valid_length)``. Without ``wanted``, ``records``
    lists every ``(message_id, offset, record_size)``; with it (message id -> anything), only the
    wanted ones are listed and their envelopes decoded. ``top`` is the highest id of the records not
    wanted; ``damaged`` and ``valid_length`` are as in :func:`scan_blocks`.
    """
    blocks, damaged, valid = scan_blocks(data)
    view = memoryview(data)
    unpack = _HEADER.unpack_from
    lengths = _LENGTHS.unpack_from
    found: list[tuple[int, int, int]] = []
    envelopes: dict[int, Envelope] = {}
    seen: dict[bytes, tuple[str, str, bytes]] = {}
    top = 0
    for pos, end in blocks:
        while pos < end:
            length, message_id = unpack(view, pos)
            size = MESSAGE_HEADER + length
            if wanted is None:
                found.append((message_id, pos, size))
            elif message_id in wanted:
                found.append((message_id, pos, size))
                start = pos + MESSAGE_HEADER
                ex_len, key_len, props_len, body_len = lengths(view, start)
                start += _LENGTHS.size
                raw = bytes(view[start : start + ex_len + key_len + props_len])
                parts = seen.get(raw)
                if parts is None:
                    parts = (
                        str(raw[:ex_len], "utf-8"),
                        str(raw[ex_len : ex_len + key_len], "utf-8"),
                        raw[ex_len + key_len :],
                    )
                    if len(seen) < 4096:
                        seen[raw] = parts
                envelopes[message_id] = (*parts, body_len)
            elif message_id > top:
                top = message_id
            pos += size
    return found, envelopes, top, damaged, valid


# -- the journal ----------------------------------------------------------------------------------
def encode_journal(op: int, queue: int, message_id: int) -> bytes:
    """One journal record."""
    return _JOURNAL.pack(op, queue, message_id)


def scan_journal(
    data: bytes | memoryview,
) -> tuple[list[tuple[int, int, int]], list[tuple[int, int]], int]:
    """Parse the journal's intact blocks: ``[(op, queue, message_id), ...]``, the damaged ranges and
    the valid length (as in :func:`scan_blocks`)."""
    blocks, damaged, valid = scan_blocks(data)
    view = memoryview(data)
    records: list[tuple[int, int, int]] = []
    for start, end in blocks:
        usable = end - (end - start) % JOURNAL_RECORD
        records.extend(_JOURNAL.iter_unpack(view[start:usable]))
    return records, damaged, valid

"""AMQP 0-9-1 on the wire, shared by both ends: framing, field tables, basic properties.

Nothing here does I/O or knows which side it runs on; the client core (:mod:`gear.amqp`) and the
reference broker (:mod:`gear.broker`) build on it. Every decoder is linear in its input and bounded
(frame size, table nesting), so a hostile peer can waste neither memory nor CPU through it.

* :mod:`gear.wire.frames`: frame constants, building frames, splitting a byte stream into frames;
* :mod:`gear.wire.table`: field tables and arrays (decode, check, encode), RabbitMQ's types;
* :mod:`gear.wire.arguments`: a method's arguments, by the layout pamqp declares for it;
* :mod:`gear.wire.codes`: reply codes, their names, which close the connection;
* :mod:`gear.wire.properties`: the basic content properties Gear reads, decoded from a content header.
"""

from __future__ import annotations

from gear.wire.frames import FrameError, FrameReader

__all__ = ("FrameError", "FrameReader")

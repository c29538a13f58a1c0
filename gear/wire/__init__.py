"""AMQP 0-9-1 on the wire, the one codec of both ends: framing, methods, properties, field tables.

Nothing here does I/O or knows which side it runs on; the client core (:mod:`gear.amqp`) and the
reference broker (:mod:`gear.broker`) build on it. Every decoder is linear in its input and bounded
(frame size, table nesting), so a hostile peer can waste neither memory nor CPU through it.

* :mod:`gear.wire.frames`: frame constants, building frames, splitting a byte stream into frames;
* :mod:`gear.wire.spec`: every method as a typed value, and the property flag table (generated from
  pamqp's spec data by ``scripts/gen_wire_spec.py``);
* :mod:`gear.wire.methods`: method frames both ways (by layout; the per-message ones by hand);
* :mod:`gear.wire.properties`: the basic content properties: decode, encode, splice;
* :mod:`gear.wire.content`: a message's frames in one go (a publish, a delivery);
* :mod:`gear.wire.table`: field tables and arrays (decode, check, encode), RabbitMQ's types;
* :mod:`gear.wire.codes`: reply codes, their names, which close the connection.
"""

from __future__ import annotations

from gear.wire.frames import FrameError, FrameReader

__all__ = ("FrameError", "FrameReader")

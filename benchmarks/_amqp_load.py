"""A minimal AMQP 0-9-1 load client for benchmarks/broker.py: one process publishes or consumes.

    python benchmarks/_amqp_load.py publish URL QUEUE COUNT [--size 1024] [--window 256]
    python benchmarks/_amqp_load.py consume URL QUEUE COUNT [--prefetch 512]

The point is to spend as little client CPU per message as possible so the broker is the bottleneck:
the handshake uses pamqp, then a publisher writes pre-encoded publish frames (method, header, body)
in windows of ``--window`` unconfirmed messages and counts ``Basic.Ack`` (multiple) confirms; a
consumer reads frames with ``struct`` only, counts ``Basic.Deliver`` (delivery tags are sequential per
channel) and acks with ``multiple`` every quarter of its prefetch. Nothing is decoded per message.

Protocol with the parent: the worker prints ``ready`` once connected (the consumer is consuming),
waits for a line on stdin, runs, then prints ``done <seconds>``.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import time
from urllib.parse import unquote, urlparse

from pamqp import commands, frame, header
from pamqp.body import ContentBody

_FRAME = struct.Struct(">BHI")
_METHOD = struct.Struct(">HH")
_DELIVER = (60, 60)
_ACK = (60, 80)


class Wire:
    """A blocking socket that speaks just enough AMQP for the load."""

    def __init__(self, url: str) -> None:
        parts = urlparse(url)
        self.sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 5672))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.sock.sendall(header.ProtocolHeader().marshal())
        self.expect(commands.Connection.Start)
        user, password = unquote(parts.username or "guest"), unquote(parts.password or "guest")
        self.send(commands.Connection.StartOk(response=f"\0{user}\0{password}"), 0)
        tune = self.expect(commands.Connection.Tune)
        assert isinstance(tune, commands.Connection.Tune)
        self.frame_max = tune.frame_max or 131072
        self.send(commands.Connection.TuneOk(tune.channel_max, self.frame_max, 0), 0)
        vhost = unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
        self.send(commands.Connection.Open(vhost), 0)
        self.expect(commands.Connection.OpenOk)
        self.send(commands.Channel.Open(), 1)
        self.expect(commands.Channel.OpenOk)

    def send(self, value: frame.FrameTypes, channel: int = 1) -> None:
        self.sock.sendall(frame.marshal(value, channel))

    def expect(self, kind: type) -> object:
        """Read frames until one of ``kind`` arrives (heartbeats and others are skipped)."""
        while True:
            while True:
                try:
                    used, _channel, value = frame.unmarshal(bytes(self.buf))
                except Exception:
                    break
                del self.buf[:used]
                if isinstance(value, kind):
                    return value
                if isinstance(value, commands.Connection.Close | commands.Channel.Close):
                    raise RuntimeError(f"broker closed: {value}")
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("broker closed the socket")
            self.buf += chunk

    def frames(self) -> tuple[list[tuple[int, int]], int]:
        """Read once; returns the (class, method) of complete method frames and the count of all frames."""
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("broker closed the socket")
        buf = self.buf
        buf += chunk
        methods: list[tuple[int, int]] = []
        pos, end, seen = 0, len(buf), 0
        while end - pos >= 7:
            kind, _channel, size = _FRAME.unpack_from(buf, pos)
            if end - pos < size + 8:
                break
            if kind == 1:
                methods.append(_METHOD.unpack_from(buf, pos + 7))
            pos += size + 8
            seen += 1
        del buf[:pos]
        return methods, seen


def publish(url: str, queue: str, count: int, size: int, window: int) -> float:
    wire = Wire(url)
    wire.send(commands.Confirm.Select())
    wire.expect(commands.Confirm.SelectOk)
    one = (
        frame.marshal(commands.Basic.Publish(exchange="", routing_key=queue), 1)
        + frame.marshal(header.ContentHeader(0, size, commands.Basic.Properties()), 1)
        + frame.marshal(ContentBody(b"x" * size), 1)
    )
    ready_and_wait()
    start = time.perf_counter()
    sent = confirmed = 0
    while confirmed < count:
        batch = min(window - (sent - confirmed), count - sent)
        if batch > 0:
            wire.sock.sendall(one * batch)
            sent += batch
        # confirms arrive as Basic.Ack with multiple; decode only those (rare compared with messages)
        chunk = wire.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("broker closed the socket")
        wire.buf += chunk
        while True:
            try:
                used, _channel, value = frame.unmarshal(bytes(wire.buf))
            except Exception:
                break
            del wire.buf[:used]
            if isinstance(value, commands.Basic.Ack):
                confirmed = max(confirmed, value.delivery_tag)
            elif isinstance(value, commands.Basic.Nack | commands.Channel.Close):
                raise RuntimeError(f"broker refused: {value}")
    return time.perf_counter() - start


def consume(url: str, queue: str, count: int, prefetch: int) -> float:
    wire = Wire(url)
    wire.send(commands.Basic.Qos(prefetch_count=prefetch))
    wire.expect(commands.Basic.QosOk)
    wire.send(commands.Basic.Consume(queue=queue))
    wire.expect(commands.Basic.ConsumeOk)
    ready_and_wait()
    start = time.perf_counter()
    delivered = acked = 0
    every = max(1, prefetch // 4)
    while delivered < count:
        methods, _seen = wire.frames()
        delivered += sum(1 for m in methods if m == _DELIVER)
        if delivered - acked >= every or delivered >= count:
            wire.send(commands.Basic.Ack(delivery_tag=delivered, multiple=True))
            acked = delivered
    return time.perf_counter() - start


def ready_and_wait() -> None:
    print("ready", flush=True)
    sys.stdin.readline()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("role", choices=("publish", "consume"))
    parser.add_argument("url")
    parser.add_argument("queue")
    parser.add_argument("count", type=int)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--prefetch", type=int, default=512)
    args = parser.parse_args()
    if args.role == "publish":
        seconds = publish(args.url, args.queue, args.count, args.size, args.window)
    else:
        seconds = consume(args.url, args.queue, args.count, args.prefetch)
    print(f"done {seconds:.6f}", flush=True)


if __name__ == "__main__":
    main()

"""Drive the sans-I/O broker core with pamqp-built client frames and a fake clock."""

from __future__ import annotations

from typing import Any

from pamqp import body as pbody, commands, frame, header, heartbeat

from gear.broker.node.config import BrokerConfig
from gear.broker.node.core import BrokerCore
from gear.broker.protocol.connection import Connection
from tests.raw_amqp import CLIENT_CAPABILITIES, PROTOCOL_HEADER

CAPABILITIES = CLIENT_CAPABILITIES


class FakeClock:
    """Time that moves only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_core(**fields: Any) -> tuple[BrokerCore, FakeClock]:
    """A broker core with a fake clock (and a processor clock that stands still: no fair-share
    pauses but for the byte bound, unless a test installs a moving ``core.cpu_clock``)."""
    clock = FakeClock()
    return BrokerCore(BrokerConfig(**fields), clock=clock, cpu_clock=FakeClock()), clock


def parse(data: bytes) -> list[tuple[int, Any]]:
    """Split server output into (channel, pamqp object) pairs."""
    out: list[tuple[int, Any]] = []
    while data:
        if data.startswith(b"AMQP"):
            out.append((0, data[:8]))
            data = data[8:]
            continue
        consumed, channel, obj = frame.unmarshal(data)
        out.append((channel, obj))
        data = data[consumed:]
    return out


class Client:
    """One client connection driven by hand."""

    def __init__(
        self,
        core: BrokerCore,
        *,
        capabilities: dict[str, Any] | None = None,
        peer: str = "127.0.0.1:1",
        certificate_user: str | None = None,
    ) -> None:
        self.core = core
        tls = certificate_user is not None
        self.conn = Connection(core, peer, tls=tls, certificate_user=certificate_user)
        self.capabilities = CAPABILITIES if capabilities is None else capabilities

    def feed(self, data: bytes) -> list[tuple[int, Any]]:
        """Feed raw bytes, finish the turn, and return what the server sent."""
        self.conn.receive(data)
        return self.turn()

    def turn(self) -> list[tuple[int, Any]]:
        """End the event-loop turn (drain queues, flush confirms) and parse the output; more turns
        while a connection waits to parse the rest of what it was fed (its fair share per turn)."""
        self.core.run_turn()
        out = self.conn.data_to_send()
        while self.core.parked:
            self.core.resume_parked()
            self.core.run_turn()
            out += self.conn.data_to_send()
        return parse(out)

    def send(self, channel: int, *methods: Any) -> list[tuple[int, Any]]:
        """Send methods (pamqp objects) on ``channel``."""
        return self.feed(b"".join(frame.marshal(m, channel) for m in methods))

    def publish_bytes(
        self,
        channel: int,
        exchange: str,
        routing_key: str,
        body: bytes = b"x",
        *,
        mandatory: bool = False,
        properties: commands.Basic.Properties | None = None,
    ) -> bytes:
        """The frames of one ``basic.publish`` with content."""
        parts = [
            frame.marshal(
                commands.Basic.Publish(exchange=exchange, routing_key=routing_key, mandatory=mandatory),
                channel,
            ),
            frame.marshal(
                header.ContentHeader(0, len(body), properties or commands.Basic.Properties()), channel
            ),
        ]
        if body:
            parts.append(frame.marshal(pbody.ContentBody(body), channel))
        return b"".join(parts)

    def publish(
        self, channel: int, exchange: str, routing_key: str, body: bytes = b"x", **kwargs: Any
    ) -> list[tuple[int, Any]]:
        """Publish one message and return the server's output."""
        return self.feed(self.publish_bytes(channel, exchange, routing_key, body, **kwargs))

    def handshake(
        self, *, heartbeat_s: int = 0, frame_max: int = 131072, channel_max: int = 2047
    ) -> list[tuple[int, Any]]:
        """Header, start-ok, tune-ok, open; returns everything the server sent."""
        out = self.feed(PROTOCOL_HEADER)
        out += self.send(
            0,
            commands.Connection.StartOk(
                client_properties={"capabilities": self.capabilities},
                mechanism="PLAIN",
                response="\x00guest\x00guest",
            ),
        )
        out += self.send(
            0,
            commands.Connection.TuneOk(channel_max=channel_max, frame_max=frame_max, heartbeat=heartbeat_s),
        )
        out += self.send(0, commands.Connection.Open(virtual_host="/"))
        return out

    def open_channel(self, channel: int = 1, *, confirm: bool = False) -> None:
        """Open a channel (and put it in confirm mode)."""
        out = self.send(channel, commands.Channel.Open())
        assert isinstance(out[-1][1], commands.Channel.OpenOk), out
        if confirm:
            out = self.send(channel, commands.Confirm.Select())
            assert isinstance(out[-1][1], commands.Confirm.SelectOk), out

    def heartbeat(self) -> list[tuple[int, Any]]:
        """Send one heartbeat frame."""
        return self.feed(heartbeat.Heartbeat().marshal())


def unvalidated(method_cls: type, **fields: Any) -> Any:
    """A pamqp method with pamqp's client-side name validation switched off (pika does not validate)."""
    loose = type(method_cls.__name__, (method_cls,), {"validate": lambda self: None})
    method: Any = object.__new__(loose)
    defaults = method_cls()
    for slot in method_cls.__slots__:  # type: ignore[attr-defined]
        setattr(method, slot, fields.get(slot, getattr(defaults, slot)))
    return method


def names(out: list[tuple[int, Any]]) -> list[str]:
    """The frame kinds in ``out`` (``Basic.Ack``, ``ContentHeader``...)."""
    return [getattr(obj, "name", type(obj).__name__) for _, obj in out]

"""Sans-I/O tests: pamqp-built client frames into the core, assertions on the frames out."""

from __future__ import annotations

from typing import Any

from pamqp import commands, frame, header
from pamqp.body import ContentBody

from gear.broker.protocol.connection import CLOSE_TIMEOUT
from tests.broker._harness import PROTOCOL_HEADER, Client, make_core, names, unvalidated


def _declare(client: Client, name: str, channel: int = 1, **kwargs: Any) -> None:
    out = client.send(channel, commands.Queue.Declare(queue=name, **kwargs))
    assert isinstance(out[-1][1], commands.Queue.DeclareOk), out


def test_handshake_frames_and_capabilities() -> None:
    core, _ = make_core()
    client = Client(core)
    out = client.handshake()
    kinds = names(out)
    assert kinds == ["Connection.Start", "Connection.Tune", "Connection.OpenOk"]
    start = out[0][1]
    caps = start.server_properties["capabilities"]
    for key in (
        "publisher_confirms",
        "basic.nack",
        "consumer_cancel_notify",
        "connection.blocked",
        "authentication_failure_close",
        "per_consumer_qos",
        "exchange_exchange_bindings",
        "direct_reply_to",
    ):
        assert caps[key] is True, key
    tune = out[1][1]
    assert (tune.channel_max, tune.frame_max, tune.heartbeat) == (2047, 131072, 60)


def test_bad_protocol_header_gets_our_header_and_close() -> None:
    core, _ = make_core()
    client = Client(core)
    out = client.feed(b"HTTP/1.1")
    assert out == [(0, PROTOCOL_HEADER)]
    assert client.conn.finished


def test_wrong_password_with_auth_failure_close_gets_403() -> None:
    core, _ = make_core()
    client = Client(core)
    client.feed(PROTOCOL_HEADER)
    out = client.send(
        0,
        commands.Connection.StartOk(
            client_properties={"capabilities": {"authentication_failure_close": True}},
            mechanism="PLAIN",
            response="\x00guest\x00wrong",
        ),
    )
    close = out[-1][1]
    assert isinstance(close, commands.Connection.Close)
    assert close.reply_code == 403
    assert close.reply_text == (
        "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. "
        "For details see the broker logfile."
    )
    assert (close.class_id, close.method_id) == (0, 0)
    assert not client.conn.finished, "the broker waits for close-ok, as RabbitMQ"
    client.send(0, commands.Connection.CloseOk())
    assert client.conn.finished


def test_tune_ok_frame_max_above_server_is_530() -> None:
    core, _ = make_core()
    client = Client(core)
    client.feed(PROTOCOL_HEADER)
    client.send(
        0, commands.Connection.StartOk(client_properties={}, mechanism="PLAIN", response="\x00guest\x00guest")
    )
    out = client.send(0, commands.Connection.TuneOk(channel_max=2047, frame_max=1 << 20, heartbeat=0))
    close = out[-1][1]
    assert isinstance(close, commands.Connection.Close)
    assert close.reply_code == 530


def test_unknown_vhost_is_530() -> None:
    core, _ = make_core()
    client = Client(core)
    client.feed(PROTOCOL_HEADER)
    client.send(
        0, commands.Connection.StartOk(client_properties={}, mechanism="PLAIN", response="\x00guest\x00guest")
    )
    client.send(0, commands.Connection.TuneOk(channel_max=2047, frame_max=131072, heartbeat=0))
    out = client.send(0, commands.Connection.Open(virtual_host="nope"))
    close = out[-1][1]
    assert close.reply_code == 530
    assert close.reply_text == "NOT_ALLOWED - vhost nope not found"


def test_method_on_unopened_channel_is_504() -> None:
    core, _ = make_core()
    client = Client(core)
    client.handshake()
    out = client.send(3, commands.Queue.Declare(queue="q"))
    close = out[-1][1]
    assert isinstance(close, commands.Connection.Close)
    assert close.reply_code == 504


def test_passive_declare_of_missing_queue_closes_channel_with_rabbitmq_text() -> None:
    core, _ = make_core()
    client = Client(core)
    client.handshake()
    client.open_channel(1)
    out = client.send(1, commands.Queue.Declare(queue="q", passive=True))
    channel, close = out[-1]
    assert channel == 1
    assert isinstance(close, commands.Channel.Close)
    assert (close.reply_code, close.reply_text) == (404, "NOT_FOUND - no queue 'q' in vhost '/'")
    assert (close.class_id, close.method_id) == (50, 10)
    # everything but close/close-ok is ignored until the client answers
    assert client.send(1, commands.Queue.Declare(queue="q2")) == []
    assert client.send(1, commands.Channel.CloseOk()) == []
    client.open_channel(1)


def test_mandatory_return_comes_before_the_confirm() -> None:
    core, _ = make_core()
    client = Client(core)
    client.handshake()
    client.open_channel(1, confirm=True)
    out = client.publish(
        1,
        "amq.direct",
        "nowhere",
        b"body",
        mandatory=True,
        properties=commands.Basic.Properties(message_id="m1"),
    )
    assert names(out) == ["Basic.Return", "ContentHeader", "ContentBody", "Basic.Ack"]
    ret, head, body, ack = (obj for _, obj in out)
    assert (ret.reply_code, ret.reply_text, ret.exchange, ret.routing_key) == (
        312,
        "NO_ROUTE",
        "amq.direct",
        "nowhere",
    )
    assert head.properties.message_id == "m1"
    assert body.value == b"body"
    assert (ack.delivery_tag, ack.multiple) == (1, False)


def test_confirms_coalesce_into_one_multiple_ack() -> None:
    core, _ = make_core()
    client = Client(core)
    client.handshake()
    client.open_channel(1, confirm=True)
    _declare(client, "q")
    out = client.feed(b"".join(client.publish_bytes(1, "", "q") for _ in range(5)))
    assert names(out) == ["Basic.Ack"]
    assert (out[0][1].delivery_tag, out[0][1].multiple) == (5, True)


def test_properties_are_forwarded_verbatim() -> None:
    core, _ = make_core()
    client = Client(core)
    client.handshake()
    client.open_channel(1)
    _declare(client, "q")
    props = commands.Basic.Properties(headers={"n": 1, "s": "v"}, message_id="id", priority=3)
    publish = client.publish_bytes(1, "", "q", b"hello", properties=props)
    raw_header = header.ContentHeader(0, 5, props).marshal()
    client.feed(publish)
    out = client.send(1, commands.Basic.Get(queue="q", no_ack=True))
    assert names(out) == ["Basic.GetOk", "ContentHeader", "ContentBody"]
    assert client.conn.data_to_send() == b""
    # re-marshal what we received: same bytes as what was published
    assert header.ContentHeader(0, 5, out[1][1].properties).marshal() == raw_header


def test_content_header_without_publish_is_505() -> None:
    core, _ = make_core()
    client = Client(core)
    client.handshake()
    client.open_channel(1)
    publish = client.publish_bytes(1, "", "q", b"abc")
    # drop the method frame: header first
    method_len = 7 + int.from_bytes(publish[3:7], "big") + 1
    out = client.feed(publish[method_len:])
    close = out[-1][1]
    assert isinstance(close, commands.Connection.Close)
    assert close.reply_code == 505


def test_message_over_max_size_is_406() -> None:
    core, _ = make_core(max_message_size=10)
    client = Client(core)
    client.handshake()
    client.open_channel(1)
    out = client.publish(1, "", "q", b"x" * 11)
    close = out[-1][1]
    assert isinstance(close, commands.Channel.Close)
    assert close.reply_code == 406
    assert close.reply_text == "PRECONDITION_FAILED - message size 11 is larger than configured max size 10"


def test_prefetch_limits_deliveries_until_ack_and_requeue_marks_redelivered() -> None:
    core, _ = make_core()
    client = Client(core)
    client.handshake()
    client.open_channel(1)
    _declare(client, "q")
    client.send(1, commands.Basic.Qos(prefetch_count=1))
    for i in range(3):
        client.publish(1, "", "q", f"m{i}".encode())
    out = client.send(1, commands.Basic.Consume(queue="q", consumer_tag="c"))
    assert names(out) == ["Basic.ConsumeOk", "Basic.Deliver", "ContentHeader", "ContentBody"]
    assert out[3][1].value == b"m0"
    out = client.send(1, commands.Basic.Ack(delivery_tag=1))
    assert names(out) == ["Basic.Deliver", "ContentHeader", "ContentBody"]
    assert out[2][1].value == b"m1"
    out = client.send(1, commands.Basic.Reject(delivery_tag=2, requeue=True))
    deliver = out[0][1]
    assert (deliver.redelivered, deliver.delivery_tag, out[2][1].value) == (True, 3, b"m1")


def test_unknown_delivery_tag_is_406() -> None:
    core, _ = make_core()
    client = Client(core)
    client.handshake()
    client.open_channel(1)
    out = client.send(1, commands.Basic.Ack(delivery_tag=7))
    close = out[-1][1]
    assert (close.reply_code, close.reply_text) == (406, "PRECONDITION_FAILED - unknown delivery tag 7")


def test_channel_close_requeues_unacked_as_redelivered() -> None:
    core, _ = make_core()
    client = Client(core)
    client.handshake()
    client.open_channel(1)
    _declare(client, "q")
    client.publish(1, "", "q", b"m")
    out = client.send(1, commands.Basic.Get(queue="q"))
    assert out[0][1].redelivered is False
    assert names(
        client.send(1, commands.Channel.Close(reply_code=200, reply_text="", class_id=0, method_id=0))
    ) == ["Channel.CloseOk"]
    client.open_channel(2)
    out = client.send(2, commands.Basic.Get(queue="q"))
    assert out[0][1].redelivered is True


def test_queue_delete_notifies_consumers() -> None:
    core, _ = make_core()
    client = Client(core)
    client.handshake()
    client.open_channel(1)
    _declare(client, "q")
    client.send(1, commands.Basic.Consume(queue="q", consumer_tag="c1"))
    out = client.send(1, commands.Queue.Delete(queue="q"))
    assert names(out) == ["Basic.Cancel", "Queue.DeleteOk"]
    assert out[0][1].consumer_tag == "c1"


def test_message_ttl_expires_into_dead_letter_exchange_with_x_death() -> None:
    core, clock = make_core()
    client = Client(core)
    client.handshake()
    client.open_channel(1)
    _declare(client, "dead")
    _declare(
        client,
        "q",
        arguments={"x-message-ttl": 100, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"},
    )
    client.publish(1, "", "q", b"m")
    clock.now += 0.2
    core.tick()
    client.turn()
    out = client.send(1, commands.Basic.Get(queue="dead", no_ack=True))
    assert names(out) == ["Basic.GetOk", "ContentHeader", "ContentBody"]
    death = out[1][1].properties.headers["x-death"][0]
    assert (death["reason"], death["queue"], death["count"]) == ("expired", "q", 1)


def test_direct_reply_to_round_trip() -> None:
    core, _ = make_core()
    requester, responder = Client(core), Client(core)
    requester.handshake()
    responder.handshake()
    requester.open_channel(1)
    responder.open_channel(1)
    requester.send(1, commands.Basic.Consume(queue="amq.rabbitmq.reply-to", consumer_tag="r", no_ack=True))
    _declare(responder, "svc")
    requester.publish(
        1, "", "svc", b"ask", properties=commands.Basic.Properties(reply_to="amq.rabbitmq.reply-to")
    )
    out = responder.send(1, commands.Basic.Get(queue="svc", no_ack=True))
    reply_to = out[1][1].properties.reply_to
    assert reply_to.startswith("amq.rabbitmq.reply-to.")
    responder.publish(1, "", reply_to, b"answer")
    out = requester.turn()
    assert names(out) == ["Basic.Deliver", "ContentHeader", "ContentBody"]
    assert out[2][1].value == b"answer"


def test_unbind_is_idempotent_like_rabbitmq() -> None:
    core, _ = make_core()
    client = Client(core)
    client.handshake()
    client.open_channel(1)
    out = client.send(1, commands.Queue.Unbind(queue="missing", exchange="amq.direct", routing_key="k"))
    assert names(out) == ["Queue.UnbindOk"]
    out = client.send(1, commands.Queue.Unbind(queue="missing", exchange="no-exchange", routing_key="k"))
    assert names(out) == ["Queue.UnbindOk"]
    out = client.send(1, commands.Exchange.Unbind(destination="a", source="b", routing_key="k"))
    assert names(out) == ["Exchange.UnbindOk"]


def _bodies(out: list[tuple[int, object]]) -> list[bytes]:
    return [obj.value for _, obj in out if type(obj).__name__ == "ContentBody"]  # type: ignore[attr-defined]


def test_priority_queue_delivers_highest_priority_first() -> None:
    core, _ = make_core()
    client = Client(core)
    client.handshake()
    client.open_channel(1)
    _declare(client, "pq", arguments={"x-max-priority": 5})
    for body, priority in ((b"low", 1), (b"high", 9), (b"none", None), (b"mid", 3)):
        client.publish(1, "", "pq", body, properties=commands.Basic.Properties(priority=priority))
    got = [_bodies(client.send(1, commands.Basic.Get(queue="pq", no_ack=True)))[0] for _ in range(4)]
    assert got == [b"high", b"mid", b"low", b"none"]


def test_consumer_priorities_prefer_the_highest_with_capacity() -> None:
    core, _ = make_core()
    client = Client(core)
    client.handshake()
    client.open_channel(1)
    _declare(client, "cq")
    client.send(1, commands.Basic.Qos(prefetch_count=1))
    client.send(1, commands.Basic.Consume(queue="cq", consumer_tag="low", arguments={"x-priority": 1}))
    client.send(1, commands.Basic.Consume(queue="cq", consumer_tag="high", arguments={"x-priority": 10}))
    out = client.publish(1, "", "cq", b"a")
    out += client.publish(1, "", "cq", b"b")
    tags = [obj.consumer_tag for _, obj in out if isinstance(obj, commands.Basic.Deliver)]
    assert tags == ["high", "low"]


def test_single_active_consumer_gets_everything_until_it_goes() -> None:
    core, _ = make_core()
    client = Client(core)
    client.handshake()
    client.open_channel(1)
    _declare(client, "sac", arguments={"x-single-active-consumer": True})
    client.send(1, commands.Basic.Consume(queue="sac", consumer_tag="first", no_ack=True))
    client.send(1, commands.Basic.Consume(queue="sac", consumer_tag="second", no_ack=True))
    out = client.feed(b"".join(client.publish_bytes(1, "", "sac", b"m") for _ in range(3)))
    assert {obj.consumer_tag for _, obj in out if isinstance(obj, commands.Basic.Deliver)} == {"first"}
    client.send(1, commands.Basic.Cancel(consumer_tag="first"))
    out = client.publish(1, "", "sac", b"m")
    assert [obj.consumer_tag for _, obj in out if isinstance(obj, commands.Basic.Deliver)] == ["second"]


def _channel_close(client: Client, method: object) -> commands.Channel.Close:
    out = client.send(1, method)
    close = out[-1][1]
    assert isinstance(close, commands.Channel.Close), out
    client.send(1, commands.Channel.CloseOk())
    client.open_channel(1)
    return close


def test_queue_argument_errors_use_rabbitmq_wording() -> None:
    core, _ = make_core()
    client = Client(core)
    client.handshake()
    client.open_channel(1)
    what = "queue 'q' in vhost '/'"
    cases: list[tuple[dict[str, Any], str]] = [
        ({"x-message-ttl": -1}, f"invalid arg 'x-message-ttl' for {what}: {{value_negative,-1}}"),
        ({"x-expires": 0}, f"invalid arg 'x-expires' for {what}: {{value_zero,0}}"),
        (
            {"x-max-length": "ten"},
            f"invalid arg 'x-max-length' for {what}: \"expected integer, got longstr\"",
        ),
        ({"x-overflow": "bogus"}, f"invalid arg 'x-overflow' for {what}: invalid_overflow"),
        ({"x-dead-letter-exchange": 5}, f"invalid type 'byte' for arg 'x-dead-letter-exchange' in {what}"),
    ]
    for arguments, text in cases:
        close = _channel_close(client, commands.Queue.Declare(queue="q", arguments=arguments))
        assert (close.reply_code, close.reply_text) == (406, "PRECONDITION_FAILED - " + text)
    _declare(client, "q", arguments={"x-max-length": 5})
    close = _channel_close(client, commands.Queue.Declare(queue="q"))
    assert close.reply_text == (
        f"PRECONDITION_FAILED - inequivalent arg 'x-max-length' for {what}: "
        "received none but current is the value '5' of type 'byte'"
    )
    close = _channel_close(client, commands.Queue.Declare(queue="q", arguments={"x-max-length": 6}))
    assert close.reply_text.endswith("received '6' but current is '5'")


def test_long_unicode_names_never_break_reply_texts() -> None:
    core, _ = make_core()
    client = Client(core)
    client.handshake()
    client.open_channel(1)
    name = "é" * 127  # 254 bytes: legal, but the reply text around it exceeds a shortstr
    close = _channel_close(client, unvalidated(commands.Queue.Declare, queue=name, passive=True))
    assert close.reply_code == 404
    assert len(close.reply_text.encode()) <= 255
    # names pamqp's outbound validation would reject still deliver
    odd = "ex*1 é"
    assert names(client.send(1, unvalidated(commands.Queue.Declare, queue=odd))) == ["Queue.DeclareOk"]
    out = client.send(1, unvalidated(commands.Exchange.Declare, exchange=odd, exchange_type="fanout"))
    assert names(out) == ["Exchange.DeclareOk"]
    assert names(client.send(1, unvalidated(commands.Queue.Bind, queue=odd, exchange=odd))) == [
        "Queue.BindOk"
    ]
    client.feed(
        frame.marshal(unvalidated(commands.Basic.Publish, exchange=odd, routing_key=""), 1)
        + frame.marshal(header.ContentHeader(0, 1), 1)
        + frame.marshal(ContentBody(b"m"), 1)
    )
    out = client.send(1, unvalidated(commands.Basic.Get, queue=odd, no_ack=True))
    assert names(out) == ["Basic.GetOk", "ContentHeader", "ContentBody"]
    assert out[0][1].exchange == odd


def test_server_methods_from_a_client_are_503() -> None:
    core, _ = make_core()
    client = Client(core)
    client.handshake()
    client.open_channel(1)
    out = client.send(1, commands.Basic.GetEmpty())
    close = out[-1][1]
    assert isinstance(close, commands.Connection.Close)
    assert (close.reply_code, close.class_id, close.method_id) == (503, 60, 72)


def _close(code: int = 200) -> commands.Connection.Close:
    return commands.Connection.Close(reply_code=code, reply_text="bye", class_id=0, method_id=0)


def test_client_close_is_answered_and_the_socket_left_to_the_client() -> None:
    core, clock = make_core()
    client = Client(core)
    client.handshake()
    client.open_channel(1)
    client.send(1, commands.Queue.Declare(queue="mine", exclusive=True))
    late = client.publish_bytes(1, "", "mine", b"late") + frame.marshal(commands.Channel.Open(), 2)
    out = client.feed(frame.marshal(_close(), 0) + late)
    assert names(out) == ["Connection.CloseOk"], "frames pipelined after close are discarded"
    assert not client.conn.finished, "the client closes the socket"
    assert "mine" not in core.vhosts["/"].queues, "exclusive queues go at close, as RabbitMQ"
    assert core.status().connections == []
    assert names(client.send(0, _close())) == ["Connection.CloseOk"], "a repeated close is answered again"
    clock.now += CLOSE_TIMEOUT + 0.1
    core.tick()
    assert client.conn.finished, "the wait for the client is bounded"


def test_crossed_closes_wait_for_the_clients_close_ok() -> None:
    core, _ = make_core()
    client = Client(core)
    client.handshake()
    out = client.send(1, commands.Basic.Qos())  # channel 1 never opened: 504, a connection error
    assert names(out) == ["Connection.Close"]
    assert names(client.send(0, _close())) == ["Connection.CloseOk"]
    assert not client.conn.finished
    client.send(0, commands.Connection.CloseOk())
    assert client.conn.finished


def test_channel_numbers_up_to_65535_open_while_the_count_is_below_channel_max() -> None:
    core, _ = make_core(channel_max=2)
    client = Client(core)
    client.handshake(channel_max=2)
    client.open_channel(65535)
    client.open_channel(7)
    out = client.send(9, commands.Channel.Open())
    close = out[-1][1]
    assert isinstance(close, commands.Connection.Close)
    assert (close.reply_code, close.class_id, close.method_id) == (530, 20, 10)
    assert close.reply_text == (
        "NOT_ALLOWED - number of channels opened (2) has reached the negotiated channel_max (2)"
    )

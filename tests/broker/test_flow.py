"""Credit flow, memory alarm and heartbeat timers, driven by the sans-I/O core with injected time."""

from __future__ import annotations

from pamqp import commands

from tests.broker._harness import Client, make_core, names


def _setup(client: Client, queue: str = "q") -> None:
    client.handshake()
    client.open_channel(1)
    out = client.send(1, commands.Queue.Declare(queue=queue))
    assert names(out) == ["Queue.DeclareOk"]


def test_credit_exhaustion_stops_reading_until_the_queue_grants_more() -> None:
    core, _ = make_core(credit=(4, 2))
    client = Client(core)
    _setup(client)
    conn = client.conn
    queue = core.vhosts["/"].queues["q"]
    conn.receive(b"".join(client.publish_bytes(1, "", "q", f"m{i}".encode()) for i in range(10)))
    # four publishes spent the credit: parsing stopped, the rest stays buffered
    assert not conn.reading
    assert len(queue.inbox) == 4
    assert core.status().connections[0].state == "flow"
    assert core.status().queues[0].state == "flow"
    for _ in range(10):
        core.run_turn()
    assert conn.reading
    assert len(queue.ready) == 10
    assert core.status().queues[0].state == "running"


def test_credit_is_granted_every_more_after_messages() -> None:
    from gear.broker.model.credit import CreditLedger, CreditMeter

    ledger, meter = CreditLedger(400), CreditMeter(200)
    for _ in range(399):
        assert ledger.spend("q")
    assert not ledger.spend("q")
    assert ledger.blocked
    grants = [meter.processed("ch") for _ in range(400)]
    assert [g for g in grants if g] == [200, 200]
    assert ledger.grant("q", 200)
    assert not ledger.blocked
    assert ledger.credit("q") == 200


def test_memory_alarm_blocks_publishers_not_consumers() -> None:
    core, _ = make_core()
    publisher, consumer = Client(core), Client(core)
    _setup(publisher)
    consumer.handshake()
    consumer.open_channel(1)
    consumer.send(1, commands.Basic.Consume(queue="q", consumer_tag="c", no_ack=True))
    core.set_memory_alarm(True)
    out = publisher.feed(b"".join(publisher.publish_bytes(1, "", "q", b"m") for _ in range(3)))
    assert names(out) == ["Connection.Blocked"]
    assert out[0][1].reason == "low on memory"
    assert not publisher.conn.reading
    states = sorted(s.state for s in core.status().connections)
    assert states == ["blocked", "running"]
    # blocked at the first publish's content header (RabbitMQ's publish_received): nothing was queued
    assert names(consumer.turn()) == []
    assert consumer.send(1, commands.Basic.Qos(prefetch_count=5))[-1][1].name == "Basic.QosOk"
    core.set_memory_alarm(False)
    assert names(publisher.turn()) == ["Connection.Unblocked"]
    assert publisher.conn.reading
    assert names(consumer.turn()) == ["Basic.Deliver", "ContentHeader", "ContentBody"] * 3


def test_watermark_in_bytes_raises_and_clears_the_alarm() -> None:
    core, _ = make_core(memory_high_watermark=5000)
    client = Client(core)
    _setup(client)
    client.publish(1, "", "q", b"x" * 6000)
    assert core.status().alarms == ["memory"]
    out = client.publish(1, "", "q", b"y")
    assert "Connection.Blocked" in names(out)
    reader = Client(core)
    reader.handshake()
    reader.open_channel(1)
    reader.send(1, commands.Basic.Get(queue="q", no_ack=True))
    assert core.status().alarms == []
    assert "Connection.Unblocked" in names(client.turn())


def test_client_that_did_not_advertise_blocked_is_paused_silently() -> None:
    core, _ = make_core()
    client = Client(core, capabilities={})
    _setup(client)
    core.set_memory_alarm(True)
    out = client.publish(1, "", "q")
    assert out == []
    assert not client.conn.reading


def test_server_sends_heartbeats_and_drops_a_silent_client() -> None:
    core, clock = make_core()
    client = Client(core)
    client.handshake(heartbeat_s=10)
    clock.now += 5.1
    core.tick()
    assert names(client.turn()) == ["Heartbeat"]
    clock.now += 10
    client.heartbeat()  # any inbound frame keeps the connection alive
    clock.now += 15
    core.tick()
    assert not client.conn.finished
    clock.now += 6
    core.tick()
    assert client.conn.finished


def test_heartbeat_zero_disables_the_timers() -> None:
    core, clock = make_core()
    client = Client(core)
    client.handshake(heartbeat_s=0)
    clock.now += 3600
    core.tick()
    assert client.turn() == []
    assert not client.conn.finished


def test_handshake_timeout_drops_the_socket() -> None:
    core, clock = make_core(handshake_timeout=2.0)
    client = Client(core)
    clock.now += 2.5
    core.tick()
    assert client.conn.finished


def test_heartbeat_on_channel_one_is_505() -> None:
    core, _ = make_core()
    client = Client(core)
    client.handshake()
    out = client.feed(b"\x08\x00\x01\x00\x00\x00\x00\xce")
    close = out[-1][1]
    assert isinstance(close, commands.Connection.Close)
    assert close.reply_code == 505


def test_partly_received_large_messages_count_against_the_watermark() -> None:
    from pamqp import body as pbody, frame, header

    core, _ = make_core(memory_high_watermark=10_000)
    client = Client(core)
    _setup(client)
    client.feed(
        frame.marshal(commands.Basic.Publish(exchange="", routing_key="q"), 1)
        + frame.marshal(header.ContentHeader(0, 30_000), 1)
        + frame.marshal(pbody.ContentBody(b"x" * 12_000), 1)
    )
    assert core.status().alarms == ["memory"]
    client.send(1, commands.Channel.Close(reply_code=200, reply_text="", class_id=0, method_id=0))
    assert core.status().alarms == []
    assert core.status().memory_used == 0


def test_a_large_backlog_goes_out_in_bounded_batches() -> None:
    from gear.broker.protocol.connection import OUTPUT_BATCH_LIMIT

    core, _ = make_core()
    client = Client(core)
    _setup(client)
    body = b"x" * 10_000
    client.feed(b"".join(client.publish_bytes(1, "", "q", body) for _ in range(300)))
    client.conn.data_to_send()
    from pamqp import frame

    client.conn.receive(frame.marshal(commands.Basic.Consume(queue="q", consumer_tag="c", no_ack=True), 1))
    batches = []
    while True:
        core.run_turn()
        data = client.conn.data_to_send()
        if not data:
            break
        batches.append(len(data))
    assert len(batches) > 1
    assert max(batches) < OUTPUT_BATCH_LIMIT + 20_000
    assert sum(batches) > 300 * len(body)


def test_disk_alarm_blocks_publishers_below_the_free_limit_and_clears_above() -> None:
    core, _ = make_core(disk_free_limit=50_000_000)
    publisher = Client(core)
    _setup(publisher)
    core.disk_free_changed(60_000_000)
    assert core.status().alarms == []
    core.disk_free_changed(49_999_999)
    assert core.status().alarms == ["disk"]
    out = publisher.feed(b"".join(publisher.publish_bytes(1, "", "q", b"m") for _ in range(2)))
    assert names(out) == ["Connection.Blocked"]
    assert out[0][1].reason == "low on disk"
    assert not publisher.conn.reading
    core.set_memory_alarm(True)  # a second alarm joins: still blocked, nothing more sent
    assert core.status().alarms == ["memory", "disk"]
    core.disk_free_changed(50_000_000)
    assert publisher.turn() == []
    core.set_memory_alarm(None)
    assert names(publisher.turn()) == ["Connection.Unblocked"]
    assert publisher.conn.reading
    assert len(core.vhosts["/"].queues["q"].ready) == 2


def test_both_alarms_name_both_resources_in_connection_blocked() -> None:
    core, _ = make_core(disk_free_limit=1000)
    publisher = Client(core)
    _setup(publisher)
    core.disk_free_changed(0)
    core.set_memory_alarm(True)
    out = publisher.publish(1, "", "q")
    assert [m.reason for _, m in out] == ["low on memory & disk"]
    status = core.status()
    assert (status.disk_free, status.disk_free_limit) == (0, 1000)
    assert "disk: 0 bytes free, limit 1,000" in str(status)
    assert "ALARM: memory, disk" in str(status)


def test_without_a_disk_free_limit_there_is_no_disk_alarm() -> None:
    core, _ = make_core()
    core.disk_free_changed(0)
    assert core.status().alarms == []
    assert "disk:" not in str(core.status())

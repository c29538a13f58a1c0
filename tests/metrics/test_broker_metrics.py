"""The reference broker under RabbitMQ's Prometheus names: counters and gauges against what the test
did, the HTTP endpoint, ``gear broker --prometheus-port``, and no SDK in the broker."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys

import aio_pika
from prometheus_client.parser import text_string_to_metric_families

from gear.broker import Broker
from gear.broker.shell.metrics import MetricsServer, families, take_reading
from tests.fleet import eventually
from tests.metrics._scrape import aget


def _values(broker: Broker, per_object: bool = False) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in families(take_reading(broker), per_object):
        for sample in family.samples:
            found[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return found


_AMQP = (("protocol", "amqp091"),)
_CLASSIC = (("protocol", "amqp091"), ("queue_type", "rabbit_classic_queue"))


async def test_counters_and_gauges_follow_what_clients_did() -> None:
    async with Broker(port=0) as broker:
        connection = await aio_pika.connect(broker.url)
        async with connection:
            channel = await connection.channel(publisher_confirms=True)
            queue = await channel.declare_queue("metrics-q")
            for n in range(5):
                await channel.default_exchange.publish(aio_pika.Message(str(n).encode()), "metrics-q")
            returned = await channel.default_exchange.publish(
                aio_pika.Message(b"lost"), "nowhere", mandatory=False
            )
            assert returned is not None
            seen = _values(broker)
            assert seen["rabbitmq_queue_messages_ready", ()] == 5
            assert seen["rabbitmq_queues", ()] == 1
            assert seen["rabbitmq_connections", ()] == 1
            assert seen["rabbitmq_channels", ()] >= 1
            got = []
            async with queue.iterator() as messages:
                async for message in messages:
                    got.append(message)
                    if len(got) == 3:
                        break
            for message in got[:2]:
                await message.ack()
            await eventually(lambda: _values(broker)["rabbitmq_queue_messages_unacked", ()] == 1)
            seen = _values(broker)
            assert seen["rabbitmq_global_messages_received_total", _AMQP] == 6
            assert seen["rabbitmq_global_messages_received_confirm_total", _AMQP] == 6
            assert seen["rabbitmq_global_messages_routed_total", _AMQP] == 5
            assert seen["rabbitmq_global_messages_unroutable_dropped_total", _AMQP] == 1
            assert seen["rabbitmq_global_messages_confirmed_total", _AMQP] == 6
            assert seen["rabbitmq_global_messages_delivered_consume_manual_ack_total", _CLASSIC] >= 3
            assert seen["rabbitmq_global_messages_acknowledged_total", _CLASSIC] == 2
            per_queue = _values(broker, per_object=True)
            queue_labels = (("queue", "metrics-q"), ("vhost", "/"))
            # five published, three taken (two acked, one held), the two the iterator had prefetched
            # requeued when it closed
            assert per_queue["rabbitmq_queue_messages_ready", queue_labels] == 2
            assert per_queue["rabbitmq_queue_messages_unacked", queue_labels] == 1
            assert ("rabbitmq_queue_messages_ready", ()) not in per_queue
        assert _values(broker)["rabbitmq_connections", ()] == 0


async def test_a_mandatory_publish_nobody_receives_counts_as_returned() -> None:
    async with Broker(port=0) as broker:
        connection = await aio_pika.connect(broker.url)
        async with connection:
            channel = await connection.channel(publisher_confirms=True, on_return_raises=False)
            await channel.default_exchange.publish(aio_pika.Message(b"x"), "nowhere", mandatory=True)
            seen = _values(broker)
            assert seen["rabbitmq_global_messages_unroutable_returned_total", _AMQP] == 1
            assert seen["rabbitmq_alarms_memory_used_watermark", ()] == 0
            broker.set_memory_alarm(True)
            assert _values(broker)["rabbitmq_alarms_memory_used_watermark", ()] == 1
            broker.set_memory_alarm(None)


async def test_the_endpoint_serves_rabbitmqs_names() -> None:
    async with Broker(port=0) as broker:
        server = MetricsServer(broker, asyncio.get_running_loop(), 0, "127.0.0.1")
        try:
            status, body = await aget(server.port, "/metrics")
        finally:
            server.close()
    assert status == 200
    names = {f.name for f in text_string_to_metric_families(body)}
    assert {
        "rabbitmq_queue_messages_ready",
        "rabbitmq_connections",
        "rabbitmq_global_messages_received",
    } <= names


def test_gear_broker_serves_metrics_on_the_port_asked_for() -> None:
    code = (
        "import sys; from gear.cli.main import app; "
        "sys.argv = ['gear', 'broker', '--port', '0', '--prometheus-port', '0']; app()"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.search(r"Prometheus metrics on http://127\.0\.0\.1:(\d+)/metrics", line)
        assert match, line
        from tests.metrics._scrape import get

        status, body = get(int(match.group(1)), "/metrics")
        assert status == 200
        assert "rabbitmq_queues 0.0" in body
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_brokers_metrics_load_no_sdk() -> None:
    sdk = ("gear.service", "gear.calling.rpc", "gear.metrics", "gear.link")
    code = (
        "import sys, gear.broker.shell.metrics; "
        f"print(sorted(m for m in sys.modules if m.startswith({sdk!r})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"

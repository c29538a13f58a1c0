"""Back-pressure over real sockets: tiny credit never deadlocks, and the watermark bounds memory."""

from __future__ import annotations

import asyncio

import aio_pika

from gear.broker import Broker


async def _wait_for(predicate: object, what: str, within: float = 10.0) -> None:
    assert callable(predicate)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not predicate():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def test_tiny_credit_throttles_but_every_publish_completes() -> None:
    async with Broker(port=0, credit=(2, 1)) as broker:
        publisher = await aio_pika.connect(broker.url)
        consumer = await aio_pika.connect(broker.url)
        async with publisher, consumer:
            pub = await publisher.channel()
            sub = await consumer.channel()
            queue = await sub.declare_queue("tiny-credit")
            got: list[bytes] = []
            done = asyncio.Event()

            async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
                await message.ack()
                got.append(message.body)
                if len(got) == 300:
                    done.set()

            await queue.consume(on_message)
            await asyncio.gather(
                *(
                    pub.default_exchange.publish(aio_pika.Message(str(i).encode()), "tiny-credit")
                    for i in range(300)
                )
            )
            await asyncio.wait_for(done.wait(), 20)
            assert got == [str(i).encode() for i in range(300)]


async def test_watermark_blocks_a_fast_publisher_and_bounds_memory() -> None:
    limit = 200_000
    async with Broker(port=0, memory_high_watermark=limit) as broker:
        publisher = await aio_pika.connect(broker.url)
        async with publisher:
            channel = await publisher.channel()
            await channel.declare_queue("bounded")
            body = b"x" * 1024
            publishes = [
                asyncio.ensure_future(channel.default_exchange.publish(aio_pika.Message(body), "bounded"))
                for _ in range(1000)
            ]
            await _wait_for(lambda: broker.status().alarms == ["memory"], "the memory alarm")
            await _wait_for(
                lambda: [c.state for c in broker.status().connections] == ["blocked"],
                "the publisher to block",
            )
            # the broker stopped reading: what it holds stays near the watermark, not 1000 messages
            await asyncio.sleep(0.2)
            assert broker.status().memory_used < limit + 64 * 1024 * 2
            assert sum(not p.done() for p in publishes) > 0
            consumer = await aio_pika.connect(broker.url)
            async with consumer:
                sub = await consumer.channel()
                queue = await sub.declare_queue("bounded", passive=True)
                drained = 0

                async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
                    nonlocal drained
                    drained += 1

                await queue.consume(on_message, no_ack=True)
                await asyncio.wait_for(asyncio.gather(*publishes), 20)
                await _wait_for(lambda: drained == 1000, "every message to be consumed")
            assert broker.status().alarms == []
            # unblocked; it may still show "flow" for a moment after the burst (credit, not the alarm)
            assert [c.state for c in broker.status().connections] in (["running"], ["flow"])


async def test_a_connection_parsed_in_shares_reads_again_when_it_caught_up() -> None:
    """A client that sends more than one turn's share of frames that need no answer (publishes nobody
    receives) and then, later, a request: the broker must read the socket again after the last share."""
    from pamqp import body, commands, frame, header

    from tests.raw_amqp import RawAmqp

    async with Broker(port=0) as broker:
        raw = await RawAmqp.open(broker.url, channel=1)
        try:
            one = (
                frame.marshal(commands.Basic.Publish(exchange="amq.fanout", routing_key="k"), 1)
                + frame.marshal(header.ContentHeader(0, 1000, commands.Basic.Properties()), 1)
                + frame.marshal(body.ContentBody(b"x" * 1000), 1)
            )
            raw.send_bytes(one * 1000)  # 1 MB: several turns' shares, no answer expected
            await asyncio.sleep(0.5)
            raw.send(1, commands.Basic.Qos(prefetch_count=1))
            await raw.expect(commands.Basic.QosOk)
        finally:
            await raw.close()

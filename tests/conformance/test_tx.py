"""Transactions: tx.select, commit, rollback, and their conflicts with publisher confirms."""

from __future__ import annotations

from tests.conformance._support import WAIT, Amqp, drain_bodies, expect_close, msg, underlay


async def test_tx_publish_is_invisible_until_commit(amqp: Amqp) -> None:
    """Publishes inside a transaction reach the queue only at tx.commit."""
    connection = await amqp.connect()
    watcher = await amqp.channel(connection)
    queue = await watcher.declare_queue("", exclusive=True)
    channel = await amqp.channel(connection, confirms=False)
    tx = channel.transaction()
    await tx.select()
    await channel.default_exchange.publish(msg("t"), queue.name)
    count = (await watcher.declare_queue(queue.name, passive=True)).declaration_result.message_count
    assert count == 0, "an uncommitted publish must not be visible"
    await tx.commit()
    assert await drain_bodies(queue) == [b"t"], "tx.commit makes the publish visible"


async def test_tx_rollback_discards_publishes_and_acks(amqp: Amqp) -> None:
    """tx.rollback drops buffered publishes and un-does buffered acks (the message stays unacked)."""
    connection = await amqp.connect()
    watcher = await amqp.channel(connection)
    queue = await watcher.declare_queue("", exclusive=True)
    await watcher.default_exchange.publish(msg("held"), queue.name)
    channel = await amqp.channel(connection, confirms=False)
    tx = channel.transaction()
    await tx.select()
    tx_queue = await channel.declare_queue(queue.name, passive=True)
    got = await tx_queue.get(no_ack=False, timeout=WAIT)
    await got.ack()
    await channel.default_exchange.publish(msg("dropped"), queue.name)
    await tx.rollback()
    await channel.close()  # the ack was rolled back: closing requeues the message
    assert await drain_bodies(queue) == [b"held"], "rollback must discard the publish and restore the ack"


async def test_tx_commit_without_select_is_406(amqp: Amqp) -> None:
    """tx.commit on a channel that never did tx.select: 406 'channel is not transactional'."""
    channel = await amqp.channel(confirms=False)
    raw_channel = await underlay(channel)
    text = await expect_close(raw_channel.tx_commit(timeout=WAIT), 406, "tx.commit without tx.select")
    assert "not transactional" in text


async def test_tx_select_on_confirm_channel_is_406(amqp: Amqp) -> None:
    """tx.select on a channel in confirm mode: 406."""
    channel = await amqp.channel(confirms=True)
    raw_channel = await underlay(channel)
    await expect_close(raw_channel.tx_select(timeout=WAIT), 406, "tx.select on a confirm channel")


async def test_confirm_select_on_tx_channel_is_406(amqp: Amqp) -> None:
    """confirm.select on a transactional channel: 406."""
    channel = await amqp.channel(confirms=False)
    raw_channel = await underlay(channel)
    await raw_channel.tx_select(timeout=WAIT)
    await expect_close(raw_channel.confirm_delivery(), 406, "confirm.select on a tx channel")

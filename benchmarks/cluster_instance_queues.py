"""Which instance-queue (``TYPE.HOST``) declaration survives the loss of a RabbitMQ cluster node?

A raw-aiormq stand-in for one Gear instance declares its queue through node 1 (so the queue, or the
quorum leader, lives on node 1: RabbitMQ 3.10 places queues on the node the client is connected to),
binds it to a topic exchange with its routing key, and leaves 20 persistent messages in it (replies
waiting for it). A publisher on node 3 sends one persistent, mandatory message every 50 ms to that key
for the whole run. Node 1 is then lost (``stop_app`` or ``kill -9``) for ``--outage`` seconds while the
instance re-attaches through node 2 every 200 ms (connect, declare with the same arguments, bind,
consume), and brought back. Per candidate and kind of loss it reports:

* ``recovered``: seconds from the instance's connection loss until it consumes again (``back+x`` when
  that only happened x s after node 1 returned);
* the declaration errors seen meanwhile;
* messages: the 20 left before the loss that reached the instance, and of the stream: confirmed,
  returned (unroutable), nacked, and confirmed but never delivered (lost); duplicates;
* what is left when node 1 is back: queues under that name (node, messages, consumers) and stale ones
  (messages, no consumer: an operator or ``x-expires`` has to clean them).

Candidates (``--only a,b``): a) durable classic + x-expires (Gear today); b) quorum + x-expires;
c) transient (non-durable, non-exclusive) classic + x-expires; d) exclusive; e) durable classic +
x-expires that falls back to a second name (``TYPE.HOST.b``) when the first cannot be declared;
r) quorum + x-expires consumed through a node that survives (the leader's node is lost, the
instance's connection is not).

Usage::

    scripts/rabbitmq-cluster start
    .venv/bin/python benchmarks/cluster_instance_queues.py --outage 15 [--only a,b] [--loss kill] [--json]
    .venv/bin/python benchmarks/cluster_instance_queues.py --cost   # what quorum TYPE/reply queues cost
    .venv/bin/python benchmarks/cluster_instance_queues.py --stuck-channel --outage 60
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import re
import statistics
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiormq
import aiormq.abc
from aiormq import spec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _nodes import Nodes

__all__ = ("main",)

TTL_MS = 600_000
BEFORE = 20
STREAM_EVERY = 0.05
RETRY_EVERY = 0.2
PERSISTENT = 2


async def _ack(msg: aiormq.abc.DeliveredMessage) -> None:
    tag = msg.delivery_tag
    assert tag is not None, "a consumed delivery has a tag"
    await msg.channel.basic_ack(tag)


@dataclass(frozen=True)
class Candidate:
    key: str
    title: str
    durable: bool
    arguments: dict[str, Any]
    exclusive: bool = False
    fallback: bool = False
    remote: bool = False


CANDIDATES = {
    c.key: c
    for c in (
        Candidate("a", "durable classic + x-expires (today)", True, {"x-expires": TTL_MS}),
        Candidate("b", "quorum + x-expires", True, {"x-queue-type": "quorum", "x-expires": TTL_MS}),
        Candidate("c", "transient classic + x-expires", False, {"x-expires": TTL_MS}),
        Candidate("d", "exclusive", False, {}, exclusive=True),
        Candidate("e", "durable classic, fallback name", True, {"x-expires": TTL_MS}, fallback=True),
        Candidate(
            "r",
            "quorum, instance on a surviving node",
            True,
            {"x-queue-type": "quorum", "x-expires": TTL_MS},
            remote=True,
        ),
    )
}


def _short(exc: BaseException, names: tuple[str, ...]) -> str:
    text = re.sub(r"'[A-Za-z0-9.\-]*EXP[0-9a-f]+[^']*'", "Q", str(exc))
    text = re.sub(r"\s+", " ", text)
    return f"{type(exc).__name__}: {text[:140]}"


class Instance:
    """One instance's host channel: declare, bind, consume with manual acks, count what arrives."""

    def __init__(self, cand: Candidate, name: str, key: str, exchange: str) -> None:
        self.cand, self.name, self.key, self.exchange = cand, name, key, exchange
        self.received: Counter[str] = Counter()
        self.received_at: dict[str, float] = {}
        self.conn: aiormq.abc.AbstractConnection | None = None
        self.channel: aiormq.abc.AbstractChannel | None = None
        self.queue: str | None = None

    async def attach(self, url: str, consume: bool) -> None:
        """Connect to ``url``, declare (with fallback if the candidate has one), bind, maybe consume."""
        conn = await asyncio.wait_for(aiormq.connect(url), 5)
        try:
            ch = await conn.channel()
            await ch.basic_qos(prefetch_count=200)
            name = self.name
            try:
                await self._declare(ch, name)
            except aiormq.exceptions.ChannelNotFoundEntity:
                if not self.cand.fallback:
                    raise
                ch = await conn.channel()
                name = self.name + ".b"
                await self._declare(ch, name)
            await ch.queue_bind(name, self.exchange, routing_key=self.key)
            if consume:
                await ch.basic_consume(name, self._on_message)
        except BaseException:
            await conn.close()
            raise
        self.conn, self.channel, self.queue = conn, ch, name

    async def _declare(self, ch: aiormq.abc.AbstractChannel, name: str) -> None:
        await ch.queue_declare(
            name, durable=self.cand.durable, exclusive=self.cand.exclusive, arguments=self.cand.arguments
        )

    async def _on_message(self, msg: aiormq.abc.DeliveredMessage) -> None:
        body = msg.body.decode()
        self.received[body] += 1
        self.received_at.setdefault(body, time.monotonic())
        await _ack(msg)

    @property
    def consuming(self) -> bool:
        ch = self.channel
        return bool(isinstance(ch, aiormq.Channel) and not ch.is_closed and ch.consumers)

    async def reattach(self, url: str, until: float, errors: Counter[str]) -> float | None:
        """Try :meth:`attach` every RETRY_EVERY s until it works (its time) or ``until`` (None)."""
        while time.monotonic() < until:
            try:
                await self.attach(url, consume=True)
                return time.monotonic()
            except (TimeoutError, aiormq.exceptions.AMQPError, OSError) as exc:
                errors[_short(exc, ())] += 1
            await asyncio.sleep(RETRY_EVERY)
        return None

    async def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                await self.conn.close()


@dataclass
class Stream:
    """The publisher on node 3: one persistent mandatory message every STREAM_EVERY s."""

    exchange: str
    key: str
    outcomes: dict[str, str] = field(default_factory=dict)
    sent_at: dict[str, float] = field(default_factory=dict)

    async def run(self, url: str, prefix: str, stop: asyncio.Event) -> None:
        conn = await aiormq.connect(url)
        ch = await conn.channel()
        i = 0
        try:
            while not stop.is_set():
                body = f"{prefix}{i}"
                i += 1
                self.sent_at[body] = time.monotonic()
                self.outcomes[body] = await self.send(ch, body)
                if ch.is_closed:
                    ch = await conn.channel()
                await asyncio.sleep(STREAM_EVERY)
        finally:
            await conn.close()

    async def send(self, ch: aiormq.abc.AbstractChannel, body: str) -> str:
        props = spec.Basic.Properties(delivery_mode=PERSISTENT, message_id=uuid.uuid4().hex)
        try:
            await asyncio.wait_for(
                ch.basic_publish(
                    body.encode(),
                    exchange=self.exchange,
                    routing_key=self.key,
                    mandatory=True,
                    properties=props,
                ),
                10,
            )
        except aiormq.exceptions.PublishError:
            return "returned"
        except aiormq.exceptions.DeliveryError:
            return "nacked"
        except (TimeoutError, aiormq.exceptions.AMQPError) as exc:
            return f"error {type(exc).__name__}"
        return "confirmed"


async def run_one(nodes: Nodes, cand: Candidate, how: str, outage: float) -> dict[str, Any]:
    """One candidate, one kind of loss of node 1; the measurements as a dict."""
    tag = uuid.uuid4().hex[:8]
    exchange, key = f"exp-{tag}", f"EXP{tag}.h1"
    admin = await aiormq.connect(nodes.urls[2])
    admin_ch = await admin.channel()
    await admin_ch.exchange_declare(exchange, exchange_type="topic", durable=True)
    inst = Instance(cand, key, key, exchange)
    errors: Counter[str] = Counter()
    if cand.remote:  # placed on node 1 by a declaration there; the instance itself uses node 2
        placer = Instance(cand, key, key, exchange)
        await placer.attach(nodes.urls[0], consume=False)
        await placer.close()
        await inst.attach(nodes.urls[1], consume=False)
    else:
        await inst.attach(nodes.urls[0], consume=False)
    holder = next((q["node"] for q in await nodes.queues(3, key)), "?")
    stream = Stream(exchange, key)
    pre_ch = await admin.channel()
    before = [await stream.send(pre_ch, f"b{i}") for i in range(BEFORE)]
    if cand.remote:
        assert inst.channel is not None
        await inst.channel.basic_consume(key, inst._on_message)

    stop = asyncio.Event()
    streaming = asyncio.create_task(stream.run(nodes.urls[2], "d", stop))
    await asyncio.sleep(1.0)
    lost_conn = asyncio.get_running_loop().create_future()
    assert inst.conn is not None

    def lost(_: object) -> None:
        if not lost_conn.done():
            lost_conn.set_result(time.monotonic())

    inst.conn.closing.add_done_callback(lost)
    t_cmd = time.monotonic()
    await nodes.lose(1, how)
    t_loss = lost_conn.result() if lost_conn.done() else time.monotonic()
    if cand.remote:
        t_loss = t_cmd
    give_up = t_cmd + outage

    recovered: float | None = None
    note = ""
    if cand.remote:  # the connection survives: wait for deliveries, re-attach if the consumer is gone
        while time.monotonic() < give_up:
            resumed = [t for b, t in inst.received_at.items() if b[0] == "d" and stream.sent_at[b] > t_loss]
            if resumed:
                recovered = min(resumed)
                break
            if not inst.consuming:
                note = "consumer cancelled; "
                await inst.close()
                recovered = await inst.reattach(nodes.urls[1], give_up, errors)
                break
            await asyncio.sleep(0.05)
    else:
        await inst.close()
        recovered = await inst.reattach(nodes.urls[1], give_up, errors)
    await asyncio.sleep(max(0.0, give_up - time.monotonic()))
    t_back_start = time.monotonic()
    await nodes.bring_back(1, how)
    t_back = time.monotonic()
    after_back = None
    if recovered is None:
        after_back = await inst.reattach(nodes.urls[1], t_back + 30, errors)
    await asyncio.sleep(3.0)  # the stream keeps going after node 1 is back
    stop.set()
    await streaming
    await asyncio.sleep(2.0)  # in-flight deliveries
    queues = await nodes.queues(3, key)

    confirmed = {b for b, o in stream.outcomes.items() if o == "confirmed"}
    outcome_counts = Counter(stream.outcomes.values())
    missing = [b for b in confirmed if b not in inst.received]
    lost_queued = [b for b in missing if stream.sent_at[b] < t_loss]  # in the queue when it went
    lost_during = [b for b in missing if t_loss <= stream.sent_at[b] < t_back_start]
    lost_after = [b for b in missing if stream.sent_at[b] >= t_back_start]
    if recovered is not None:
        rec = f"{recovered - t_loss:.1f}"
    elif after_back is not None:
        rec = f"back+{after_back - t_back:.1f}"
    else:
        rec = "never"
    result = {
        "candidate": cand.key,
        "title": cand.title,
        "loss": how,
        "holder": holder,
        "recovered_s": rec,
        "note": note,
        "errors": dict(errors),
        "before_kept": f"{sum(1 for i in range(BEFORE) if inst.received[f'b{i}'])}/"
        f"{before.count('confirmed')}",
        "stream": dict(outcome_counts),
        "lost_queued": len(lost_queued),
        "lost_during": len(lost_during),
        "lost_after_back": len(lost_after),
        "duplicates": sum(n - 1 for n in inst.received.values() if n > 1),
        "queues_after": queues,
        "stale": [q["name"] for q in queues if q["consumers"] == "0"],
        "node_back_s": round(t_back - t_back_start, 1),
    }
    await inst.close()
    for q in queues:
        with contextlib.suppress(Exception):
            ch = await admin.channel()
            await ch.queue_delete(q["name"])
    with contextlib.suppress(Exception):
        ch = await admin.channel()
        await ch.exchange_delete(exchange)
    await admin.close()
    return result


# -- what a quorum instance queue costs ---------------------------------------------------------------


async def call_rate(
    nodes: Nodes, type_quorum: bool, reply_quorum: bool, seconds: float, inflight: int
) -> float:
    """Gear-shaped calls per second over raw aiormq: a confirmed mandatory request to a TYPE queue
    (server on node 3), a confirmed reply to the caller's own queue (caller on node 2), manual acks."""
    tag = uuid.uuid4().hex[:8]
    req_q, rep_q = f"cost-type-{tag}", f"cost-reply-{tag}"
    quorum: dict[str, Any] = {"x-queue-type": "quorum"}
    server = await aiormq.connect(nodes.urls[2])
    caller = await aiormq.connect(nodes.urls[1])
    pending: dict[str, asyncio.Future[None]] = {}
    try:
        s_ch, s_pub = await server.channel(), await server.channel()
        await s_ch.queue_declare(req_q, durable=True, arguments=quorum if type_quorum else {})
        await s_ch.basic_qos(prefetch_count=inflight)
        c_ch, c_pub = await caller.channel(), await caller.channel()
        await c_ch.queue_declare(
            rep_q, durable=True, arguments={**(quorum if reply_quorum else {}), "x-expires": TTL_MS}
        )
        await c_ch.basic_qos(prefetch_count=inflight)

        async def serve(msg: aiormq.abc.DeliveredMessage) -> None:
            props = msg.header.properties
            await s_pub.basic_publish(
                msg.body,
                routing_key=props.reply_to or "",
                mandatory=True,
                properties=spec.Basic.Properties(
                    correlation_id=props.correlation_id, message_id=uuid.uuid4().hex
                ),
            )
            await _ack(msg)

        async def on_reply(msg: aiormq.abc.DeliveredMessage) -> None:
            fut = pending.pop(msg.header.properties.correlation_id or "", None)
            if fut is not None and not fut.done():
                fut.set_result(None)
            await _ack(msg)

        await s_ch.basic_consume(req_q, serve)
        await c_ch.basic_consume(rep_q, on_reply)
        done = 0
        end = time.monotonic() + seconds

        async def worker() -> None:
            nonlocal done
            loop = asyncio.get_running_loop()
            while time.monotonic() < end:
                cid = uuid.uuid4().hex
                fut = pending[cid] = loop.create_future()
                await c_pub.basic_publish(
                    b"x" * 100,
                    routing_key=req_q,
                    mandatory=True,
                    properties=spec.Basic.Properties(correlation_id=cid, reply_to=rep_q, message_id=cid),
                )
                await asyncio.wait_for(fut, 30)
                done += 1

        begin = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(inflight)))
        return done / (time.monotonic() - begin)
    finally:
        with contextlib.suppress(Exception):
            ch = await server.channel()
            await ch.queue_delete(req_q)
            await ch.queue_delete(rep_q)
        await caller.close()
        await server.close()


async def queue_cost(nodes: Nodes, count: int) -> dict[str, float]:
    """Seconds to declare ``count`` queues and memory they take across the cluster, classic vs quorum."""
    out: dict[str, float] = {}
    for kind, args in (("classic", {}), ("quorum", {"x-queue-type": "quorum"})):
        before = await _cluster_memory(nodes)
        tag = uuid.uuid4().hex[:8]
        conn = await aiormq.connect(nodes.urls[0])
        ch = await conn.channel()
        begin = time.monotonic()
        for i in range(count):
            await ch.queue_declare(
                f"cost-{kind}-{tag}-{i}", durable=True, arguments={**args, "x-expires": TTL_MS}
            )
        out[f"{kind} declare ms"] = (time.monotonic() - begin) * 1000 / count
        await asyncio.sleep(2)
        out[f"{kind} KiB"] = (await _cluster_memory(nodes) - before) / 1024 / count
        for i in range(count):
            await ch.queue_delete(f"cost-{kind}-{tag}-{i}")
        await conn.close()
    return out


async def _cluster_memory(nodes: Nodes) -> float:
    total = 0.0
    for n in (1, 2, 3):
        status = json.loads(await nodes.ctl(n, "status", "--formatter", "json"))
        total += status["memory"]["total"]["erlang"]
    return total


async def cost(nodes: Nodes, rounds: int, seconds: float, inflight: int, count: int) -> None:
    combos = (("classic", "classic"), ("quorum", "classic"), ("quorum", "quorum"))
    rates: dict[tuple[str, str], list[float]] = {c: [] for c in combos}
    for r in range(rounds):
        for combo in combos if r % 2 == 0 else tuple(reversed(combos)):
            rate = await call_rate(nodes, combo[0] == "quorum", combo[1] == "quorum", seconds, inflight)
            rates[combo].append(rate)
            print(f"# round {r + 1} TYPE {combo[0]}, reply {combo[1]}: {rate:.0f} calls/s", file=sys.stderr)
    base = rates[combos[0]]
    print(
        f"calls/s, {inflight} in flight, {rounds} rounds x {seconds:g}s (median; ratio = median of "
        "per-round ratios to classic/classic):"
    )
    for combo in combos:
        ratio = statistics.median(x / b for x, b in zip(rates[combo], base, strict=True))
        print(
            f"  TYPE queue {combo[0]:<7} reply queue {combo[1]:<7} {statistics.median(rates[combo]):7.0f}"
            f"  x{ratio:.2f}"
        )
    per_queue = await queue_cost(nodes, count)
    print(
        f"{count} queues declared through node 1, per queue: "
        + ", ".join(f"{k} {v:.1f}" for k, v in per_queue.items())
    )


# -- a publishing channel that meets a dead quorum leader ----------------------------------------------


async def stuck_channel(nodes: Nodes, how: str, limit: float) -> None:
    """A quorum queue led by node 1; node 1 is lost; a channel opened on node 2 at that moment publishes
    to the queue every 0.25 s, and every second a fresh channel publishes once. Prints when each kind
    of channel first got a confirm (``None``: never within ``limit``)."""
    name = f"stuck-{uuid.uuid4().hex[:8]}"
    conn = await aiormq.connect(nodes.urls[0])
    ch = await conn.channel()
    await ch.queue_declare(name, durable=True, arguments={"x-queue-type": "quorum"})
    await conn.close()
    conn = await aiormq.connect(nodes.urls[1])
    props = spec.Basic.Properties(delivery_mode=PERSISTENT)

    async def confirmed(channel: aiormq.abc.AbstractChannel) -> bool:
        try:
            await asyncio.wait_for(channel.basic_publish(b"x", routing_key=name, properties=props), 10)
            return True
        except (TimeoutError, aiormq.exceptions.AMQPError):
            return False

    try:
        await nodes.lose(1, how)
        t0 = time.monotonic()
        old = await conn.channel()
        old_ok = fresh_ok = None
        nacks = 0
        while time.monotonic() - t0 < limit and (old_ok is None or fresh_ok is None):
            if old_ok is None:
                if await confirmed(old):
                    old_ok = time.monotonic() - t0
                else:
                    nacks += 1
            if fresh_ok is None and nacks % 4 == 0:
                fresh = await conn.channel()
                if await confirmed(fresh):
                    fresh_ok = time.monotonic() - t0
                await fresh.close()
            await asyncio.sleep(0.25)
        show = lambda t: "never" if t is None else f"{t:.1f}s"  # noqa: E731
        print(
            f"{how}: channel opened at the loss: first confirm {show(old_ok)} ({nacks} nacks); "
            f"fresh channels: first confirm {show(fresh_ok)}"
        )
    finally:
        await conn.close()
        await nodes.heal()
        conn = await aiormq.connect(nodes.urls[1])
        with contextlib.suppress(Exception):
            await (await conn.channel()).queue_delete(name)
        await conn.close()


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (
        "cand",
        "loss",
        "recovered s",
        "before kept",
        "stream conf/ret/nack/err",
        "lost queued/during/after",
        "dup",
        "after node is back",
    )
    print(" | ".join(head))
    print(" | ".join("-" * len(h) for h in head))
    for r in rows:
        s = r["stream"]
        err = sum(v for k, v in s.items() if k.startswith("error"))
        left = ", ".join(
            f"{q['name'].split('.', 1)[-1]}@{q['node'].split('@')[0]} msgs={q['messages']} "
            f"cons={q['consumers']}"
            for q in r["queues_after"]
        )
        print(
            " | ".join(
                (
                    f"{r['candidate']}) {r['title']}",
                    r["loss"],
                    r["note"] + r["recovered_s"],
                    r["before_kept"],
                    f"{s.get('confirmed', 0)}/{s.get('returned', 0)}/{s.get('nacked', 0)}/{err}",
                    f"{r['lost_queued']}/{r['lost_during']}/{r['lost_after_back']}",
                    str(r["duplicates"]),
                    left,
                )
            )
        )
    print("\ndeclaration errors while re-attaching:")
    for r in rows:
        for text, n in r["errors"].items():
            print(f"  {r['candidate']}/{r['loss']}: {n} x {text}")


async def amain(args: argparse.Namespace) -> None:
    logging.getLogger("aiormq").setLevel(logging.CRITICAL)  # every lost connection logs a traceback
    nodes = Nodes()
    if args.cost:
        await cost(nodes, args.rounds, args.seconds, args.inflight, args.queues)
        return
    if args.stuck_channel:
        for _ in range(args.rounds):
            for how in args.loss.split(","):
                await stuck_channel(nodes, how, args.outage)
        return
    rows = []
    for key in args.only.split(","):
        for how in args.loss.split(","):
            print(f"# {key}) {CANDIDATES[key].title}, {how} of node 1 for {args.outage:g}s", file=sys.stderr)
            try:
                rows.append(await run_one(nodes, CANDIDATES[key], how, args.outage))
            finally:
                await nodes.heal()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print_table(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outage", type=float, default=15.0, help="seconds node 1 stays lost")
    parser.add_argument("--only", default=",".join(CANDIDATES), help="candidates, e.g. a,b")
    parser.add_argument("--loss", default="stop_app,kill", help="stop_app, kill or both")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--cost",
        action="store_true",
        help="instead: call rate with quorum TYPE and reply queues, and per-queue cost",
    )
    parser.add_argument(
        "--stuck-channel",
        action="store_true",
        help="instead: does a channel that meets a dead quorum leader stay nacked? "
        "(--rounds trials per --loss, each up to --outage s)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="--cost: interleaved rounds")
    parser.add_argument("--seconds", type=float, default=4.0, help="--cost: seconds per round")
    parser.add_argument("--inflight", type=int, default=64, help="--cost: calls in flight")
    parser.add_argument("--queues", type=int, default=200, help="--cost: queues declared per kind")
    asyncio.run(amain(parser.parse_args()))


if __name__ == "__main__":
    main()

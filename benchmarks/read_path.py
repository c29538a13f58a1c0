"""Benchmark: the client's read path, without sockets, against pamqp's parser in the same run.

    python benchmarks/read_path.py [--messages 2000] [--rounds 9]
    python benchmarks/read_path.py --baseline /tmp/main    # this checkout against another one

Feeds broker frames built with pamqp, one read per message, into a link connection's stream
(``Stream.data_received``: the client core's ``receive``, its events, the shell's one dispatch) and
measures the process CPU time per message for two shapes: a delivery (``basic.deliver`` of a 100 B
JSON reply with Gear's properties and headers, handed to a consumer) and a publisher confirm
(``basic.ack``, settling one pending publish's future). The peer is pamqp's ``frame.unmarshal`` reading
the same bytes frame by frame (parsing only: no content assembly, no dispatch). Rounds alternate the
sides so that machine noise hits both alike; the medians and their ratio are printed. The ratio is the
figure to compare across commits (``--json`` prints it for scripts).

``--baseline DIR`` compares this checkout's Gear with the one in ``DIR`` (say ``git worktree add
/tmp/main main``) instead: each round runs this script once on each (``PYTHONPATH``), in alternating
order, and the medians of the per-round ratios (this checkout / baseline) are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pamqp import body as pamqp_body, commands, frame
from pamqp.header import ContentHeader

from gear.amqp import Credentials, Delivery
from gear.link.confirms import Confirms, Verdict
from gear.link.connection import Channel, Connection, Endpoint
from gear.wire import spec
from gear.wire.content import Publish
from gear.wire.properties import Properties

__all__ = ("main",)

_PROPS = commands.Basic.Properties(
    message_id="00000000000000a7.1",
    correlation_id="00000000000000a7",
    reply_to="WEB.h1",
    message_type="gear.reply",
    app_id="REPO.r1",
    headers={"x-gear-method": "echo", "x-gear-ok": True},
    content_type="application/json",
)
_BODY = b'{"data": "' + b"x" * 80 + b'"}'
_PUBLISH = Publish("", "q", Properties(), b"")


def _deliver(channel: int, tag: int) -> bytes:
    method = commands.Basic.Deliver("ctag", tag, False, "gear", "WEB.h1")
    return (
        frame.marshal(method, channel)
        + frame.marshal(ContentHeader(0, len(_BODY), _PROPS), channel)
        + frame.marshal(pamqp_body.ContentBody(_BODY), channel)
    )


async def _reply(conn: Connection, start: Callable[[], Any], answer: Any, channel: int) -> Any:
    pending = asyncio.ensure_future(start())
    await asyncio.sleep(0)
    conn.stream.data_received(frame.marshal(answer, channel))
    return await pending


async def _link() -> tuple[Connection, Confirms, list[Delivery]]:
    """A connection through its handshake, a consumer on channel 1 and a confirm channel 2."""
    endpoint = Endpoint("broker", 5672, False, "/", Credentials.plain("g", "g"), "g", None)
    conn = Connection(endpoint, heartbeat=0, name="bench", where="amqp://broker/")
    conn.core.initiate()
    start = commands.Connection.Start(server_properties={"product": "RabbitMQ"}, mechanisms="PLAIN")
    for method in (start, commands.Connection.Tune(2047, 131072, 0), commands.Connection.OpenOk()):
        conn.stream.data_received(frame.marshal(method, 0))
    consumer: Channel = await _reply(conn, conn.channel, commands.Channel.OpenOk(), 1)
    publisher: Channel = await _reply(conn, conn.channel, commands.Channel.OpenOk(), 2)
    got: list[Delivery] = []
    await _reply(conn, lambda: consumer.consume("q", "ctag", got.append), commands.Basic.ConsumeOk("ctag"), 1)
    await _reply(conn, lambda: publisher.call(spec.Confirm.Select()), commands.Confirm.SelectOk(), 2)
    return conn, Confirms(publisher), got


def _pamqp(reads: list[bytes]) -> float:
    started = time.process_time_ns()
    for data in reads:
        at = 0
        while at < len(data):
            used, _, _ = frame.unmarshal(data[at:])
            at += used
    return (time.process_time_ns() - started) / len(reads)


async def _round(
    conn: Connection, confirms: Confirms, got: list[Delivery], n: int, first: int
) -> tuple[float, float]:
    deliveries = [_deliver(1, first + i) for i in range(n)]
    got.clear()
    started = time.process_time_ns()
    for data in deliveries:
        conn.stream.data_received(data)
    delivery = (time.process_time_ns() - started) / n
    assert len(got) == n
    verdicts = [confirms.send(_PUBLISH, f"m{first + i}") for i in range(n)]
    conn.core.data_to_send()
    acks = [frame.marshal(commands.Basic.Ack(first + i + 1), 2) for i in range(n)]
    started = time.process_time_ns()
    for data in acks:
        conn.stream.data_received(data)
    confirm = (time.process_time_ns() - started) / n
    assert all(v.done() and v.result() is Verdict.ACK for v in verdicts)
    await asyncio.sleep(0)  # run what the reads scheduled (the stream's flush)
    return delivery, confirm


async def _run(messages: int, rounds: int) -> dict[str, float]:
    conn, confirms, got = await _link()
    peer_deliveries = [_deliver(1, i + 1) for i in range(messages)]
    peer_acks = [frame.marshal(commands.Basic.Ack(i + 1), 2) for i in range(messages)]
    gear_d, gear_c, peer_d, peer_c = [], [], [], []
    for r in range(rounds):
        d, c = await _round(conn, confirms, got, messages, r * messages)
        gear_d.append(d)
        gear_c.append(c)
        peer_d.append(_pamqp(peer_deliveries))
        peer_c.append(_pamqp(peer_acks))
    figures = {
        "delivery_ns": statistics.median(gear_d),
        "confirm_ns": statistics.median(gear_c),
        "pamqp_delivery_ns": statistics.median(peer_d),
        "pamqp_confirm_ns": statistics.median(peer_c),
    }
    figures["delivery_ratio"] = figures["delivery_ns"] / figures["pamqp_delivery_ns"]
    figures["confirm_ratio"] = figures["confirm_ns"] / figures["pamqp_confirm_ns"]
    return figures


def _compare(baseline: str, messages: int, rounds: int) -> None:
    here = str(Path(__file__).resolve().parent.parent)
    options = ["--json", "--rounds", "3", "--messages", str(messages)]
    ratios: dict[str, list[float]] = {"delivery_ns": [], "confirm_ns": []}
    for r in range(rounds):
        got = {}
        for side in (here, baseline) if r % 2 == 0 else (baseline, here):
            env = {**os.environ, "PYTHONPATH": side}
            # each checkout's own script: the shell's API (what a publish is) may differ between them
            command = [sys.executable, str(Path(side) / "benchmarks" / "read_path.py"), *options]
            out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
            got[side] = json.loads(out)
        for key, values in ratios.items():
            values.append(got[here][key] / got[baseline][key])
    print(f"read path, this checkout / {baseline}, median of {rounds} alternating rounds ({messages} reads):")
    for key, values in ratios.items():
        print(
            f"  {key.removesuffix('_ns'):9s} {statistics.median(values):.3f}  {[round(v, 3) for v in values]}"
        )


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--baseline", help="a checkout of Gear to compare this one with (see above)")
    args = parser.parse_args()
    if args.baseline:
        _compare(args.baseline, args.messages, args.rounds)
        return
    figures = asyncio.run(_run(args.messages, args.rounds))
    if args.json:
        print(json.dumps(figures))
        return
    print(
        f"read path, CPU ns per message, median of {args.rounds} alternating rounds ({args.messages} reads):"
    )
    for shape in ("delivery", "confirm"):
        print(
            f"  {shape:9s} Gear {figures[f'{shape}_ns']:8.0f}   pamqp parse only "
            f"{figures[f'pamqp_{shape}_ns']:8.0f}   ratio {figures[f'{shape}_ratio']:.2f}"
        )


if __name__ == "__main__":
    main()

"""Does a refused login take longer for a known user than for an unknown one? (It must not.)

    python benchmarks/login_timing.py [--rounds 9] [--logins 300]

Each round times ``--logins`` refused PLAIN logins over TCP against the reference broker (a wrong
password for an existing user, then a user that does not exist; the order alternates per round),
each with a fresh connection that advertises ``authentication_failure_close``. It prints the median
per-login time of each kind and the median of the per-round ratios unknown/known: a ratio near 1.00
means the answer time does not reveal which users exist.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import struct
import time

from pamqp import commands, frame

from gear.broker import Broker

HEADER = b"AMQP\x00\x00\x09\x01"


async def _refused_login(port: int, user: str) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(HEADER)
    await _read_frame(reader)  # connection.start
    writer.write(
        frame.marshal(
            commands.Connection.StartOk(
                client_properties={"capabilities": {"authentication_failure_close": True}},
                mechanism="PLAIN",
                response=f"\0{user}\0wrong-password",
            ),
            0,
        )
    )
    _, _, close = frame.unmarshal(await _read_frame(reader))
    if not isinstance(close, commands.Connection.Close) or close.reply_code != 403:
        raise RuntimeError(f"expected connection.close 403, got {close!r}")
    writer.write(frame.marshal(commands.Connection.CloseOk(), 0))
    writer.close()
    await writer.wait_closed()


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readexactly(7)
    size = struct.unpack(">BHI", head)[2]
    return head + await reader.readexactly(size + 1)


async def _time(port: int, user: str, logins: int) -> float:
    start = time.perf_counter()
    for _ in range(logins):
        await _refused_login(port, user)
    return (time.perf_counter() - start) / logins


async def main(rounds: int, logins: int) -> None:
    async with Broker(port=0, users={"guest": "guest", "alice": "alice-password"}) as broker:
        known: list[float] = []
        unknown: list[float] = []
        for i in range(rounds):
            order = [("alice", known), ("nobody-here", unknown)]
            for user, sink in order if i % 2 == 0 else reversed(order):
                sink.append(await _time(broker.port, user, logins))
        ratios = [u / k for u, k in zip(unknown, known, strict=True)]
        print(f"refused logins, {rounds} rounds x {logins} per kind (reference broker, TCP on loopback)")
        print(f"  known user, wrong password : {statistics.median(known) * 1e6:8.1f} us per login")
        print(f"  unknown user               : {statistics.median(unknown) * 1e6:8.1f} us per login")
        print(f"  ratio unknown/known        : {statistics.median(ratios):8.2f} (median of per-round ratios)")
        print(f"  failed logins counted      : {broker.status().failed_logins}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--logins", type=int, default=300)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.logins))

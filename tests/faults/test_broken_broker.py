"""A broker (or anything between) that breaks the protocol is found at once, on both brokers.

Bytes are injected into, or flipped in, what a broker sends through the proxy. The client's one
parser sees the violation in the frame it arrives in: the link is dropped with a reason that says
what the broker sent (not later, by a silence watchdog), every call still ends by its deadline with
its result or a ``GearError``, and the service reconnects and works again.
"""

from __future__ import annotations

import asyncio

import pytest

import gear
from tests.faults.conftest import Rig, eventually

pytestmark = pytest.mark.slow


def _frame(kind: int, channel: int, payload: bytes, end: bytes = b"\xce") -> bytes:
    return bytes([kind]) + channel.to_bytes(2, "big") + len(payload).to_bytes(4, "big") + payload + end


_DELIVER_ON_77 = _frame(1, 77, b"\x00\x3c\x00\x3c\x01t" + (1).to_bytes(8, "big") + b"\x00\x00\x01k")
_ACK_ON_3 = _frame(1, 3, b"\x00\x3c\x00\x50" + (1).to_bytes(8, "big") + b"\x00")

GARBAGE = {
    "frame size huge": (b"\x01\x00\x01\x7f\xff\xff\xff", "frame size 2147483647 is larger than negotiated"),
    "unknown frame type": (_frame(9, 0, b""), "unknown frame type 9"),
    "missing frame end": (_frame(8, 0, b"", end=b"\x00"), "frame end octet should be 0xCE"),
    "method on an unopened channel": (_DELIVER_ON_77, "Basic.Deliver on channel 77, which is not open"),
    "confirm on a consumer channel": (_ACK_ON_3, "Basic.Ack on channel 3, which is not in confirm mode"),
}


async def _lost(svc: gear.Service) -> list[str]:
    reasons: list[str] = []
    svc.on_lost = reasons.append
    return reasons


@pytest.mark.parametrize("garbage", sorted(GARBAGE))
async def test_garbage_from_the_broker_drops_the_link_at_once_and_calls_still_end(
    rig: Rig, garbage: str
) -> None:
    data, said = GARBAGE[garbage]
    rig.build(heartbeat=5)
    await rig.fleet.start()
    assert rig.client is not None
    reasons = await _lost(rig.client)
    loop = asyncio.get_running_loop()
    async with rig.workload():
        await asyncio.sleep(0.5)
        rig.proxy.pause(to_client=True, to_server=False)  # nothing in flight to the client: a frame boundary
        await asyncio.sleep(0.2)
        injected_at = loop.time()
        assert rig.proxy.inject(data) == 3
        rig.proxy.resume()
        await eventually(lambda: bool(reasons), limit=10, what="the client dropping the link")
        found_after = loop.time() - injected_at
        await eventually(
            lambda: rig.client is not None and rig.client.connected, limit=15, what="a reconnect"
        )
        # calls work again (on a loaded machine the first one after the reconnect may take a while)
        await eventually(lambda: rig.ledger.recovery(injected_at) is not None, limit=15, what="a call")
    rig.ledger.check()  # every call ended by its deadline with a result or a GearError; no cast lost
    assert said in reasons[0], reasons
    assert "broke the protocol" in reasons[0]
    # found by the parser in the frame it arrived in, not by the watchdog (7.5 s of silence here)
    assert found_after < rig.client.settings.heartbeat
    assert rig.ledger.recovery(injected_at) is not None
    rig.report(f"garbage: {garbage}", found_after_s=round(found_after, 3))


async def test_flipped_bytes_never_reach_a_caller_as_anything_but_a_gear_error(rig: Rig) -> None:
    """A byte flipped at a random place of what the broker sends: whatever it breaks (a frame, a
    property, a body), calls end by their deadline with a result or a ``GearError``, and no link is
    left hanging: every client is connected again afterwards. (A cast whose body or method name was
    damaged on the way cannot be served: integrity is TCP's and TLS's job, so losses are not asserted.)"""
    rig.build(heartbeat=5)
    await rig.fleet.start()
    async with rig.workload():
        for seed in range(8):
            await asyncio.sleep(0.4)
            rig.proxy.corrupt(1, seed=seed)
        await asyncio.sleep(1.0)
    assert rig.ledger.hung == []
    assert rig.ledger.untyped == []
    await eventually(lambda: all(s.connected for s in rig.fleet.services), limit=20, what="every link back")
    assert rig.ledger.ok > 0
    rig.report("flipped bytes")

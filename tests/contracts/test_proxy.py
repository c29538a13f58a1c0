"""Typed proxies on a running broker: results validated into the declared types, the same typed errors
as ``rpc.call`` (declared ones as their own classes), deadlines (per call and inherited), every address
form (gather and casts on fan-out), blocking twins for plain handlers and callbacks."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Protocol

import pytest

import gear
from tests.conftest import unique
from tests.contracts.shop import Closed, Keeper, OutOfStock, OutOfStockDetails, Restock, Shop, Sku, Stock
from tests.fleet import Fleet, eventually


async def _shop(fleet: Fleet, hosts: tuple[str, ...] = ("s1",)) -> tuple[str, list[Keeper], gear.Service]:
    """A SHOP TYPE with one instance per host, and a client: ``(type, keepers, client)``."""
    kind = unique("SHOP")
    keepers = []
    for host in hosts:
        keeper = Keeper()
        fleet.service(kind, host).implement(Shop, keeper)
        keepers.append(keeper)
    client = fleet.client()
    await fleet.start()
    return kind, keepers, client


async def test_calls_return_the_declared_types(fleet: Fleet) -> None:
    kind, (_keeper,), client = await _shop(fleet)
    shop = client.proxy(Shop, f"{kind}.s1")
    assert await shop.take(Sku(sku="apple")) == Stock(sku="apple", count=1)
    assert await shop.size() == 1
    assert await shop.report() == [Stock(sku="apple", count=1)]  # the contract's default payload
    assert await shop.report(Sku(sku="pear")) == [Stock(sku="pear", count=0)]
    stateless = client.proxy(Shop, kind)  # any one instance
    assert await stateless.count(Sku(sku="apple")) == Stock(sku="apple", count=1)
    assert repr(shop) == f"<Shop proxy for '{kind}.s1'>"


async def test_declared_errors_are_raised_as_their_classes_and_others_as_rpc_call_raises(
    fleet: Fleet,
) -> None:
    kind, (keeper,), client = await _shop(fleet)
    shop = client.proxy(Shop, f"{kind}.s1")
    await shop.take(Sku(sku="apple"))
    await shop.take(Sku(sku="apple"))
    with pytest.raises(OutOfStock) as caught:
        await shop.take(Sku(sku="apple"))
    assert (caught.value.message, caught.value.details) == ("no apple left", {"sku": "apple", "wanted": 1})
    assert caught.value.data == OutOfStockDetails(sku="apple", wanted=1)  # the typed model, validated
    keeper.closed = True
    with pytest.raises(Closed, match="come back tomorrow"):
        await shop.take(Sku(sku="apple"))
    with pytest.raises(gear.RemoteError) as remote:  # not declared by count: a plain RemoteError
        await shop.count(Sku(sku="boom"))
    assert type(remote.value) is gear.RemoteError
    assert remote.value.type == "KeyError"
    with pytest.raises(gear.BadPayloadError):  # what mypy would refuse, sent anyway
        await shop.count({"sku": "apple", "extra": 1})  # type: ignore[arg-type]
    with pytest.raises(gear.UnroutableError):
        await gear.with_timeout(client.proxy(Shop, f"{kind}.nohost"), 0.5).size()


class _Sloppy(Keeper):
    async def take(self, item: Sku) -> Stock:
        raise OutOfStock("none left", {"sku": item.sku})  # no 'wanted': not what OutOfStockDetails says


async def test_the_server_refuses_to_send_a_declared_error_whose_details_do_not_fit(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    kind = unique("SHOP")
    fleet.service(kind, "s1").implement(Shop, _Sloppy())
    client = fleet.client()
    await fleet.start()
    shop = client.proxy(Shop, f"{kind}.s1")
    with caplog.at_level(logging.ERROR, logger="gear.contract"), pytest.raises(gear.RemoteError) as caught:
        await shop.take(Sku(sku="apple"))
    said = (
        "Shop.take raised OutOfStock, but its details do not fit OutOfStockDetails (wanted: Field required)"
    )
    assert (type(caught.value), caught.value.type) == (gear.RemoteError, "ContractViolationError")
    assert caught.value.message.startswith(said)
    assert [r.getMessage() for r in caplog.records if r.name == "gear.contract"] == [
        f"{said}: not sent as OutOfStock; fix the details or the model"
    ]


async def test_a_declared_error_that_arrives_with_details_that_do_not_fit_is_a_bad_result(
    fleet: Fleet,
) -> None:
    kind = unique("SHOP")
    server = fleet.service(kind, "s1")

    @server.handler("take")  # not through implement(): an old server, whose errors nothing checks
    async def take(item: Sku) -> Stock:
        raise OutOfStock("none left", {"sku": item.sku, "wanted": "lots"})

    client = fleet.client()
    await fleet.start()
    with pytest.raises(gear.BadResultError) as caught:
        await client.proxy(Shop, f"{kind}.s1").take(Sku(sku="apple"))
    assert str(caught.value).startswith(
        f"the OutOfStock error of 'take' on '{kind}.s1' arrived, but its details do not fit "
        "OutOfStockDetails (wanted: Input should be a valid integer"
    )
    assert caught.value.result["details"] == {"sku": "apple", "wanted": "lots"}


class _Newer(Shop, Protocol):
    async def discount(self, item: Sku) -> int: ...


async def test_a_server_behind_the_contract_gives_method_not_found_and_bad_results(fleet: Fleet) -> None:
    kind = unique("SHOP")
    server = fleet.service(kind, "s1")

    @server.handler("size")
    async def size() -> str:  # an old or a wrong server: a string where the contract says int
        return "lots"

    client = fleet.client()
    await fleet.start()
    newer = client.proxy(_Newer, f"{kind}.s1")
    with pytest.raises(gear.MethodNotFoundError):
        await newer.discount(Sku(sku="apple"))
    with pytest.raises(gear.BadResultError) as caught:
        await newer.size()
    assert (caught.value.method, caught.value.result) == ("size", "lots")
    assert caught.value.details["errors"][0]["type"] == "int_parsing"


async def test_deadlines_per_call_per_proxy_and_inherited(fleet: Fleet) -> None:
    kind = unique("SLOW")
    seen: list[float | None] = []

    class Slow(gear.Contract, Protocol):
        async def wait(self, seconds: float) -> float: ...
        async def ask(self, seconds: float) -> float: ...

    class Handlers:
        async def wait(self, seconds: float) -> float:
            seen.append(gear.remaining_budget())
            await asyncio.sleep(seconds)
            return seconds

        async def ask(self, seconds: float) -> float:  # a nested call, without a timeout of its own
            return await server.proxy(Slow, f"{kind}.s1").wait(seconds)

    server = fleet.service(kind, "s1")
    server.implement(Slow, Handlers())
    client = fleet.client()
    await fleet.start()
    slow = client.proxy(Slow, f"{kind}.s1", timeout=0.4)
    with pytest.raises(gear.CallTimeoutError) as caught:
        await slow.wait(2.0)
    assert caught.value.timeout == pytest.approx(0.4)
    assert await gear.with_timeout(slow, 3.0).wait(0.5) == 0.5
    with pytest.raises(gear.CallTimeoutError) as again:
        await gear.with_timeout(slow, 0.3).wait(2.0)
    assert again.value.timeout == pytest.approx(0.3)
    # the nested call inherits the outer budget (1 s here), not the default 5 s
    seen.clear()
    with pytest.raises(gear.RemoteError) as nested:
        await gear.with_timeout(slow, 1.0).ask(3.0)
    assert nested.value.type == "CallTimeoutError"
    assert seen
    assert seen[0] is not None
    assert seen[0] < 1.0
    for bad in (0, -1.0, float("inf"), float("nan"), 1e300):
        with pytest.raises(gear.ConfigurationError, match="timeout must be more than 0 and at most"):
            gear.with_timeout(slow, bad)
        with pytest.raises(gear.ConfigurationError, match="timeout must be more than 0 and at most"):
            client.proxy(Slow, kind, timeout=bad)


async def test_fan_out_gathers_calls_and_casts_one_way_methods(fleet: Fleet) -> None:
    kind, keepers, client = await _shop(fleet, ("s1", "s2", "s3"))
    keepers[2].closed = True
    every = client.proxy(Shop, f"{kind}.*")
    answers = await gear.gather(every.take, Sku(sku="apple"), expected=3, timeout=5)
    by_sender = {a.sender: a for a in answers}
    assert sorted(by_sender) == [f"{kind}.s1", f"{kind}.s2", f"{kind}.s3"]
    assert by_sender[f"{kind}.s1"].value() == Stock(sku="apple", count=1)
    closed = by_sender[f"{kind}.s3"]
    assert not closed.ok
    assert isinstance(closed.error, Closed)
    with pytest.raises(Closed):
        closed.value()
    assert [a.value() for a in await gear.gather(every.size, expected=3)] == [1, 1, 1]
    await every.restock(Restock(sku="pear", count=4))  # one-way: a cast to every instance
    await eventually(lambda: all(k.restocked for k in keepers), what="every instance restocked")
    with pytest.raises(gear.ConfigurationError, match=r"reaches several instances: gather the replies"):
        await every.take(Sku(sku="apple"))
    with pytest.raises(gear.ConfigurationError, match="is one-way"):
        await gear.gather(every.restock, Restock(sku="pear"))
    everyone = client.proxy(Shop, "*.*")
    assert len(await gear.gather(everyone.size, expected=3, timeout=5)) == 3


async def test_one_way_methods_cast_to_one_instance(fleet: Fleet) -> None:
    kind, (keeper,), client = await _shop(fleet)
    await client.proxy(Shop, f"{kind}.s1").restock(Restock(sku="fig"))
    await eventually(lambda: keeper.restocked == [Restock(sku="fig")], what="restocked")


async def test_plain_handlers_call_through_the_blocking_twins(fleet: Fleet) -> None:
    kind, keepers, client = await _shop(fleet, ("s1", "s2"))
    front = unique("FRONT")

    class Front(gear.Contract, Protocol):
        async def summary(self, sku: str) -> dict[str, Any]: ...

    class FrontHandlers:
        def summary(self, sku: str) -> dict[str, Any]:  # a worker thread: no await here
            one = svc.proxy(Shop, f"{kind}.s1")
            taken = gear.call_sync(one.take, Sku(sku=sku))
            gear.call_sync(one.restock, Restock(sku=sku, count=5))
            sizes = gear.gather_sync(svc.proxy(Shop, f"{kind}.*").size, expected=2)
            try:
                gear.call_sync(one.take, Sku(sku="none"))
            except OutOfStock as exc:
                missing = exc.message
            return {
                "thread": threading.current_thread().name,
                "taken": taken.count,
                "sizes": sorted(a.value() for a in sizes),
                "missing": missing,
            }

    svc = fleet.service(front, "f1")
    svc.implement(Front, FrontHandlers())
    await svc.start()
    got = await client.proxy(Front, front).summary("apple")
    assert got["thread"].startswith("gear-")
    assert got["taken"] == 1
    assert got["sizes"] == [1, 1]
    assert got["missing"] == "no none left"
    await eventually(lambda: keepers[0].stock.get("apple") == 6, what="restocked from a thread")
    with pytest.raises(gear.ConfigurationError, match="this thread runs an event loop"):
        gear.call_sync(client.proxy(Shop, kind).size)


async def test_callbacks_receive_typed_results_and_declared_errors(fleet: Fleet) -> None:
    kind, _, client = await _shop(fleet)
    shop = client.proxy(Shop, f"{kind}.s1")
    got: asyncio.Queue[Stock | gear.GearError] = asyncio.Queue()
    for _ in range(3):
        request_id = await gear.call_with_callback(shop.take, Sku(sku="apple"), callback=got.put_nowait)
        assert len(request_id) == 16
    results = [await asyncio.wait_for(got.get(), 5) for _ in range(3)]
    assert results[:2] == [Stock(sku="apple", count=1), Stock(sku="apple", count=0)]
    assert isinstance(results[2], OutOfStock)


async def test_proxies_refuse_what_is_not_one(fleet: Fleet) -> None:
    client = fleet.client()
    with pytest.raises(gear.ConfigurationError, match="invalid address"):
        client.proxy(Shop, "SHOP.a.b")
    with pytest.raises(gear.ConfigurationError, match="is not a contract"):
        client.proxy(Keeper, "SHOP")
    with pytest.raises(gear.ConfigurationError, match="is not a contract proxy"):
        gear.with_timeout(Keeper(), 1.0)
    with pytest.raises(gear.ConfigurationError, match="is not a method of a contract proxy"):
        await gear.gather(Keeper().size)
    assert gear.contract.proxy_address(client.proxy(Shop, "SHOP.*")) == "SHOP.*"

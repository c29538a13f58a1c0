"""Reading a contract: its methods, their payload and result types, one-way and declared errors, and
the refusals a badly formed contract gets (before any service uses it)."""

from __future__ import annotations

import inspect
from typing import Any, Protocol

import pytest

import gear
from gear.contract import contract_spec, is_contract
from gear.contract.spec import NO_PAYLOAD
from tests.contracts.shop import Closed, Keeper, OutOfStock, Restock, Shop, Sku, Stock


def test_a_contract_is_read_into_its_methods_in_order() -> None:
    spec = contract_spec(Shop)
    assert (spec.name, spec.type, spec.version, spec.doc) == ("Shop", "SHOP", "2.1.0", "A stock keeper.")
    assert [m.name for m in spec.methods] == ["take", "count", "restock", "size", "report"]
    take = spec.method("take")
    assert take is not None
    assert (take.payload, take.result, take.one_way, take.errors) == (Sku, Stock, False, (OutOfStock, Closed))
    assert take.doc == "Take one item off the shelf."
    assert take.signature == "(item: Sku) -> Stock"
    restock = spec.method("restock")
    assert restock is not None
    assert (restock.payload, restock.result, restock.one_way) == (Restock, None, True)
    size = spec.method("size")
    assert size is not None
    assert (size.payload, size.result, size.has_payload) == (NO_PAYLOAD, int, False)
    report = spec.method("report")
    assert report is not None
    assert report.default == Sku(sku="all")
    assert spec.method("nope") is None


def test_contracts_are_told_from_implementations_and_proxies() -> None:
    assert is_contract(Shop)
    assert not is_contract(Keeper)  # subclasses the contract, is not one
    assert not is_contract(gear.Contract)
    assert not is_contract(Sku)
    assert not is_contract(Keeper())


def test_inherited_methods_belong_to_the_derived_contract() -> None:
    class Base(gear.Contract, Protocol):
        async def ping(self) -> str: ...

    class Derived(Base, Protocol, type="DER"):
        async def pong(self, n: int) -> int: ...

    assert [m.name for m in contract_spec(Derived).methods] == ["ping", "pong"]
    assert contract_spec(Derived).type == "DER"
    assert contract_spec(Base).type is None


class _Model:
    pass


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("def get(self, q: int) -> int: ...", "must be an 'async def' method"),
        ("async def get(self, a: int, b: int) -> int: ...", "one payload parameter at most"),
        ("async def get(self, *, a: int) -> int: ...", "one payload parameter at most"),
        ("async def get(self, q: int): ...", "annotate its return type"),
        ("async def get(self, q) -> int: ...", "annotate its payload parameter 'q'"),
        ("async def get(self, q: 'Nowhere') -> int: ...", "cannot resolve its type hints"),
        ("@gear.one_way\nasync def get(self, q: int) -> int: ...", "a one-way method returns None, not int"),
        (
            "@gear.one_way\n@gear.raises(gear.ContractError)\nasync def get(self, q: int) -> None: ...",
            "a one-way method has no reply, so it declares no errors",
        ),
        ("pass", "declares no methods"),
    ],
)
def test_a_badly_formed_contract_is_refused_naming_the_method(body: str, message: str) -> None:
    namespace: dict[str, Any] = {"gear": gear, "Protocol": Protocol}
    lines = "\n".join(f"    {line}" for line in body.splitlines())
    exec(f"class Bad(gear.Contract, Protocol):\n{lines}\n", namespace)
    with pytest.raises(gear.ConfigurationError, match=message) as caught:
        contract_spec(namespace["Bad"])
    if "get" in body:
        assert "Bad.get" in str(caught.value)


def test_what_is_not_a_contract_is_refused() -> None:
    class NotAProtocol(gear.Contract):
        async def get(self, q: int) -> int:
            return q

    for wrong in (NotAProtocol, Keeper, int, "Shop"):
        with pytest.raises(gear.ConfigurationError, match="is not a contract"):
            contract_spec(wrong)


def test_declarations_are_checked_where_they_are_written() -> None:
    with pytest.raises(gear.ConfigurationError, match="ContractError subclasses"):
        gear.raises(KeyError)  # type: ignore[arg-type]
    with pytest.raises(gear.ConfigurationError, match="invalid service TYPE"):

        class Dotted(gear.Contract, Protocol, type="A.B"):
            async def get(self) -> int: ...


def test_a_contract_error_carries_its_message_and_details() -> None:
    err = OutOfStock("no pear left", {"sku": "pear", "wanted": 2})
    assert (str(err), err.type, err.message, err.details) == (
        "no pear left",
        "OutOfStock",
        "no pear left",
        {"sku": "pear", "wanted": 2},
    )
    assert isinstance(err, gear.RemoteError)
    assert Closed().details == {}


def test_signatures_say_what_a_method_takes() -> None:
    assert inspect.iscoroutinefunction(Shop.take)
    assert contract_spec(Shop).method("size").signature == "() -> int"  # type: ignore[union-attr]

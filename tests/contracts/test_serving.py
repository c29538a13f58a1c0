"""``svc.implement``: an implementation must have every method of the contract with its signature,
or the service refuses it before it starts, naming each method that is missing or differs."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

import gear
from tests.contracts.shop import Keeper, Restock, Shop, Sku, Stock


def _service() -> gear.Service:
    return gear.Service("SHOP", "s1", url="amqp://guest:guest@127.0.0.1:1/")


def test_a_complete_implementation_registers_every_method() -> None:
    svc = _service()
    svc.implement(Shop, Keeper())
    assert sorted(svc.methods) == ["count", "report", "restock", "size", "take"]
    assert svc.contracts == (Shop,)


class _Partial:  # structural, without subclassing the contract; plain defs are fine
    def take(self, item: Sku) -> Stock:
        return Stock(sku=item.sku, count=0)

    def count(self, item: Sku) -> Stock:
        return Stock(sku=item.sku, count=0)

    def size(self) -> int:
        return 0


class _Inherits(Shop):  # subclasses the contract but forgets two methods: the contract's stubs do not count
    async def take(self, item: Sku) -> Stock:
        return Stock(sku=item.sku, count=0)

    async def count(self, item: Sku) -> Stock:
        return Stock(sku=item.sku, count=0)

    async def size(self) -> int:
        return 0


# mypy refuses _Inherits() too ("Cannot instantiate abstract class"): the static twin of this check
@pytest.mark.parametrize("implementation", [_Partial(), _Inherits()], ids=["structural", "subclass"])  # type: ignore[abstract]
def test_missing_methods_are_named_and_nothing_is_registered(implementation: Any) -> None:
    svc = _service()
    with pytest.raises(gear.ConfigurationError) as caught:
        svc.implement(Shop, implementation)
    name = type(implementation).__name__
    assert f"{name} does not implement Shop.restock(order: Restock) -> None" in str(caught.value)
    assert f"{name} does not implement Shop.report(item: Sku) -> list[Stock]" in str(caught.value)
    assert "take" not in str(caught.value)
    assert dict(svc.methods) == {}
    assert svc.contracts == ()


class _Differs(Keeper):
    async def take(self, item: str) -> Stock:  # type: ignore[override]
        return Stock(sku=item, count=0)

    async def count(self, item: Sku) -> dict[str, Any]:  # type: ignore[override]
        return {}

    async def size(self, verbose: bool) -> int:  # type: ignore[override]
        return 0

    async def restock(self) -> None:  # type: ignore[override]
        return None

    async def report(self, item):  # type: ignore[override]
        return []


def test_methods_whose_signature_differs_are_named() -> None:
    svc = _service()
    with pytest.raises(gear.ConfigurationError) as caught:
        svc.implement(Shop, _Differs())
    text = str(caught.value)
    assert "_Differs.take(item: str) -> Stock differs from the contract Shop.take(item: Sku) -> Stock" in text
    assert "_Differs.count(item: Sku) -> dict[str, Any] differs from the contract" in text
    assert "_Differs.size(verbose: bool) -> int differs from the contract Shop.size() -> int" in text
    assert "_Differs.restock() -> None differs from the contract Shop.restock(order: Restock) -> None" in text
    assert "_Differs.report: annotate its return type (the contract says Shop.report" in text
    assert dict(svc.methods) == {}


def test_equal_types_from_elsewhere_pass_and_other_mistakes_are_refused() -> None:
    class SameShape:  # another class with the same JSON Schema accepts the same payloads
        pass

    svc = _service()
    with pytest.raises(gear.ConfigurationError, match="takes an instance, not the class Keeper"):
        svc.implement(Shop, Keeper)
    with pytest.raises(gear.ConfigurationError, match="is not a contract"):
        svc.implement(Keeper, Keeper())

    @svc.handler("size")
    async def size() -> int:
        return 0

    with pytest.raises(gear.ConfigurationError, match="handlers for 'size' are already registered"):
        svc.implement(Shop, Keeper())
    assert sorted(svc.methods) == ["size"]


def test_instance_attributes_can_implement_methods() -> None:
    keeper = Keeper()

    async def restock(order: Restock) -> None:
        return None

    namespace = type("Namespace", (), {})()
    for name in ("take", "count", "size", "report"):
        setattr(namespace, name, getattr(keeper, name))
    namespace.restock = restock
    svc = _service()
    svc.implement(Shop, namespace)
    assert svc.methods["restock"] is restock


# -- the start check compares what the wire accepts (issue 40) ------------------------------------


class Item(BaseModel):
    """Another module's name and docstring for the contract's Sku."""

    model_config = ConfigDict(extra="forbid", title="SomethingElse")
    sku: str = Field(description="said differently")


class Wider(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sku: str
    note: str  # one more required field: other JSON on the wire


class _Renamed(Keeper):
    async def take(self, item: Item) -> Stock:  # type: ignore[override]
        return Stock(sku=item.sku, count=0)


class _Wider(Keeper):
    async def take(self, item: Wider) -> Stock:  # type: ignore[override]
        return Stock(sku=item.sku, count=0)


def test_a_payload_class_renamed_or_redocumented_with_the_same_fields_is_accepted() -> None:
    svc = _service()
    svc.implement(Shop, _Renamed())
    assert "take" in svc.methods


def test_a_payload_class_that_takes_other_json_is_refused_with_both_signatures() -> None:
    with pytest.raises(gear.ConfigurationError) as caught:
        _service().implement(Shop, _Wider())
    assert "_Wider.take(item: Wider) -> Stock differs from the contract Shop.take(item: Sku) -> Stock" in str(
        caught.value
    )


def test_a_field_called_title_is_part_of_the_wire_schema() -> None:
    from pydantic import TypeAdapter

    from gear.contract.schema import wire_schema

    class Titled(BaseModel):
        title: str

    class Untitled(BaseModel):
        name: str

    titled, untitled = (wire_schema(TypeAdapter(m).json_schema()) for m in (Titled, Untitled))
    assert titled["properties"] == {"title": {"type": "string"}}
    assert titled != untitled

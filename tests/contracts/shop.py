"""A small contract for the contract tests: a stock keeper with a call, a declared error, a one-way
method and a method without a payload (the models and contracts live at module level, as a real
contract module's would, so their type hints resolve)."""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, ConfigDict

import gear


class Sku(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sku: str


class Stock(BaseModel):
    sku: str
    count: int


class Restock(BaseModel):
    sku: str
    count: int = 1


ALL = Sku(sku="all")
"""The default payload of ``report``."""


class OutOfStockDetails(BaseModel):
    sku: str
    wanted: int


class OutOfStock(gear.ContractError):
    """Nothing left of that SKU."""

    details_model = OutOfStockDetails


class Closed(gear.ContractError):
    """The shop is closed."""


class Shop(gear.Contract, Protocol, type="SHOP", version="2.1.0"):
    """A stock keeper."""

    @gear.raises(OutOfStock, Closed)
    async def take(self, item: Sku) -> Stock:
        """Take one item off the shelf."""
        ...

    async def count(self, item: Sku) -> Stock: ...

    @gear.one_way
    async def restock(self, order: Restock) -> None: ...

    async def size(self) -> int:
        """How many SKUs the shop knows."""
        ...

    async def report(self, item: Sku = ALL) -> list[Stock]: ...


class Keeper(Shop):
    """The implementation the tests serve: subclasses the contract, as mypy-checked ones do."""

    def __init__(self, stock: dict[str, int] | None = None) -> None:
        self.stock = dict(stock or {"apple": 2})
        self.closed = False
        self.restocked: list[Restock] = []

    async def take(self, item: Sku) -> Stock:
        if self.closed:
            raise Closed("come back tomorrow")
        left = self.stock.get(item.sku, 0)
        if left <= 0:
            raise OutOfStock(f"no {item.sku} left", OutOfStockDetails(sku=item.sku, wanted=1))
        self.stock[item.sku] = left - 1
        return Stock(sku=item.sku, count=left - 1)

    async def count(self, item: Sku) -> Stock:
        if item.sku == "boom":
            raise KeyError(item.sku)
        return Stock(sku=item.sku, count=self.stock.get(item.sku, 0))

    async def restock(self, order: Restock) -> None:
        self.restocked.append(order)
        self.stock[order.sku] = self.stock.get(order.sku, 0) + order.count

    async def size(self) -> int:
        return len(self.stock)

    async def report(self, item: Sku = ALL) -> list[Stock]:
        names = sorted(self.stock) if item.sku == "all" else [item.sku]
        return [Stock(sku=n, count=self.stock.get(n, 0)) for n in names]

"""A tiny inventory library, the subject of the demo test suite."""

from __future__ import annotations


class OutOfStock(Exception):
    pass


class Inventory:
    def __init__(self) -> None:
        self._items: dict[str, int] = {}

    def add(self, sku: str, quantity: int) -> None:
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        self._items[sku] = self._items.get(sku, 0) + quantity

    def remove(self, sku: str, quantity: int) -> None:
        if self._items.get(sku, 0) < quantity:
            raise OutOfStock(sku)
        self._items[sku] -= quantity

    def count(self, sku: str) -> int:
        return self._items.get(sku, 0)

    def total(self) -> int:
        return sum(self._items.values())

"""A simulated remote warehouse: slow calls, so the demo suite takes a moment."""

from __future__ import annotations

import time

from inventory import Inventory

LATENCY_S = 0.4


class Warehouse:
    def __init__(self, stock: dict[str, int]) -> None:
        self._stock = dict(stock)

    def fetch_stock(self) -> dict[str, int]:
        time.sleep(LATENCY_S)
        return dict(self._stock)

    def sync_into(self, inventory: Inventory) -> int:
        """Add the warehouse's stock to ``inventory``; returns the number of SKUs synced."""
        stock = self.fetch_stock()
        for sku, quantity in stock.items():
            if quantity > 0:
                inventory.add(sku, quantity)
        return sum(1 for q in stock.values() if q > 0)

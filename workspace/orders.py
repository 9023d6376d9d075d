"""Orders: lines, totals, and reserving stock from an inventory."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from inventory import Inventory
from pricing import add_tax, apply_discount, bulk_discount_percent


class OrderError(Exception):
    pass


@dataclass
class Line:
    sku: str
    quantity: int
    unit_cents: int

    def total(self) -> int:
        gross = self.quantity * self.unit_cents
        return apply_discount(gross, bulk_discount_percent(self.quantity))


@dataclass
class Order:
    tax_percent: Decimal = Decimal("20")
    lines: list[Line] = field(default_factory=list)
    placed: bool = False

    def add_line(self, sku: str, quantity: int, unit_cents: int) -> None:
        if self.placed:
            raise OrderError("order already placed")
        if quantity <= 0 or unit_cents < 0:
            raise OrderError("bad quantity or price")
        self.lines.append(Line(sku, quantity, unit_cents))

    def subtotal(self) -> int:
        return sum(line.total() for line in self.lines)

    def total(self) -> int:
        return add_tax(self.subtotal(), self.tax_percent)

    def place(self, inventory: Inventory) -> None:
        """Reserve every line's stock, or none of it."""
        if not self.lines:
            raise OrderError("empty order")
        reserved: list[Line] = []
        try:
            for line in self.lines:
                inventory.remove(line.sku, line.quantity)
                reserved.append(line)
        except Exception:
            for line in reserved:
                inventory.add(line.sku, line.quantity)
            raise
        self.placed = True

"""Prices, discounts and tax for the demo shop. Amounts are integer cents."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

BULK_THRESHOLD = 10
BULK_DISCOUNT_PERCENT = 5


def apply_discount(cents: int, percent: int) -> int:
    if percent < 0:
        raise ValueError("discount cannot be negative")
    # Deliberate bug for the demo: a discount above 100% should be capped at 100%.
    return round_cents(Decimal(cents) * (100 - percent) / 100)


def bulk_discount_percent(quantity: int) -> int:
    # Deliberate bug for the demo: the threshold itself should qualify (>=).
    return BULK_DISCOUNT_PERCENT if quantity > BULK_THRESHOLD else 0


def add_tax(cents: int, rate_percent: Decimal) -> int:
    return round_cents(Decimal(cents) * (100 + rate_percent) / 100)


def round_cents(amount: Decimal) -> int:
    return int(amount.quantize(Decimal("1"), rounding=ROUND_HALF_UP))


def format_cents(cents: int, currency: str = "EUR") -> str:
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{cents // 100}.{cents % 100:02d} {currency}"

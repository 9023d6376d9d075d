from decimal import Decimal

import pytest

from pricing import add_tax, apply_discount, bulk_discount_percent, format_cents


def test_no_discount_keeps_the_price():
    assert apply_discount(1999, 0) == 1999


def test_ten_percent_discount():
    assert apply_discount(2000, 10) == 1800


def test_discount_rounds_half_up():
    assert apply_discount(1005, 50) == 503


def test_negative_discount_is_refused():
    with pytest.raises(ValueError):
        apply_discount(100, -5)


def test_discount_above_100_percent_is_capped():
    # Fails on purpose in the demo: apply_discount does not cap the percentage.
    assert apply_discount(1000, 120) == 0


def test_bulk_discount_starts_at_the_threshold():
    # Fails on purpose in the demo: the threshold is compared with > instead of >=.
    assert bulk_discount_percent(10) == 5


def test_no_bulk_discount_below_the_threshold():
    assert bulk_discount_percent(9) == 0


def test_tax_is_added():
    assert add_tax(1000, Decimal("20")) == 1200


def test_reduced_tax_rate_rounds():
    assert add_tax(999, Decimal("5.5")) == 1054


@pytest.mark.parametrize(
    ("cents", "text"),
    [(0, "0.00 EUR"), (5, "0.05 EUR"), (123456, "1234.56 EUR"), (-250, "-2.50 EUR")],
)
def test_format_cents(cents, text):
    assert format_cents(cents) == text

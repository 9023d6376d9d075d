from decimal import Decimal

import pytest

from inventory import Inventory, OutOfStock
from orders import Order, OrderError


@pytest.fixture
def stocked():
    inv = Inventory()
    inv.add("apple", 20)
    inv.add("pear", 5)
    return inv


def test_subtotal_sums_lines():
    order = Order()
    order.add_line("apple", 2, 150)
    order.add_line("pear", 1, 300)
    assert order.subtotal() == 600


def test_total_adds_tax():
    order = Order(tax_percent=Decimal("10"))
    order.add_line("apple", 1, 1000)
    assert order.total() == 1100


def test_bulk_lines_are_discounted():
    order = Order(tax_percent=Decimal("0"))
    order.add_line("apple", 20, 100)
    assert order.total() == 1900


def test_placing_reserves_stock(stocked):
    order = Order()
    order.add_line("apple", 3, 100)
    order.place(stocked)
    assert stocked.count("apple") == 17
    assert order.placed


def test_placing_is_all_or_nothing(stocked):
    order = Order()
    order.add_line("apple", 3, 100)
    order.add_line("pear", 50, 100)
    with pytest.raises(OutOfStock):
        order.place(stocked)
    assert stocked.count("apple") == 20


def test_empty_order_cannot_be_placed(stocked):
    with pytest.raises(OrderError):
        Order().place(stocked)


def test_placed_order_is_frozen(stocked):
    order = Order()
    order.add_line("apple", 1, 100)
    order.place(stocked)
    with pytest.raises(OrderError):
        order.add_line("pear", 1, 100)


@pytest.mark.parametrize(("quantity", "price"), [(0, 100), (-1, 100), (1, -5)])
def test_bad_lines_are_refused(quantity, price):
    with pytest.raises(OrderError):
        Order().add_line("apple", quantity, price)

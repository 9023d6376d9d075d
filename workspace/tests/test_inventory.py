import pytest

from inventory import Inventory, OutOfStock


def test_add_then_count():
    inv = Inventory()
    inv.add("apple", 3)
    assert inv.count("apple") == 3


def test_remove_more_than_stock_fails():
    inv = Inventory()
    inv.add("apple", 1)
    with pytest.raises(OutOfStock):
        inv.remove("apple", 2)


def test_total():
    inv = Inventory()
    inv.add("a", 1)
    inv.add("b", 2)
    assert inv.total() == 3


@pytest.mark.parametrize("quantity", [0, -1])
def test_add_rejects_non_positive(quantity):
    with pytest.raises(ValueError):
        Inventory().add("x", quantity)

import pytest

from inventory import Inventory
from warehouse import Warehouse


@pytest.fixture
def warehouse():
    return Warehouse({"apple": 40, "pear": 0, "plum": 7})


def test_fetch_stock_returns_a_copy(warehouse):
    stock = warehouse.fetch_stock()
    stock["apple"] = 0
    assert warehouse.fetch_stock()["apple"] == 40


def test_sync_adds_positive_stock(warehouse):
    inv = Inventory()
    assert warehouse.sync_into(inv) == 2
    assert inv.count("apple") == 40
    assert inv.count("pear") == 0


def test_sync_twice_accumulates(warehouse):
    inv = Inventory()
    warehouse.sync_into(inv)
    warehouse.sync_into(inv)
    assert inv.total() == 94


def test_empty_warehouse_syncs_nothing():
    inv = Inventory()
    assert Warehouse({}).sync_into(inv) == 0
    assert inv.total() == 0


def test_sync_keeps_existing_stock(warehouse):
    inv = Inventory()
    inv.add("plum", 3)
    warehouse.sync_into(inv)
    assert inv.count("plum") == 10

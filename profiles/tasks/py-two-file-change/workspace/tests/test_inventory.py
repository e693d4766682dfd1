import pytest

from inventory.models import Item
from inventory.report import total_value


def test_total_without_discount() -> None:
    assert total_value([Item("pen", 150, 4), Item("pad", 300, 1)]) == 900


def test_negative_price_rejected() -> None:
    with pytest.raises(ValueError):
        Item("pen", -1, 1)

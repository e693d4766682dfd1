import pytest

from inventory.models import Item
from inventory.report import total_value


def test_discount_defaults_to_zero() -> None:
    assert Item("pen", 150, 4).discount_percent == 0


def test_discount_applies_per_unit_rounded_down() -> None:
    # 333 cents at 10% off is 299.7 -> 299 cents per unit.
    assert total_value([Item("ink", 333, 3, discount_percent=10)]) == 897


def test_mixed_items() -> None:
    items = [Item("pen", 150, 4), Item("pad", 300, 2, discount_percent=50)]
    assert total_value(items) == 900


@pytest.mark.parametrize("bad", [-1, 101])
def test_discount_out_of_range_rejected(bad: int) -> None:
    with pytest.raises(ValueError):
        Item("pen", 100, 1, discount_percent=bad)

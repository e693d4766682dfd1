"""Reports over inventory items."""

from inventory.models import Item


def total_value(items: list[Item]) -> int:
    """Total stock value in cents."""
    return sum(item.price_cents * item.quantity for item in items)

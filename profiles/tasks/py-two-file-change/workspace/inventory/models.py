"""Inventory records."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Item:
    name: str
    price_cents: int
    quantity: int

    def __post_init__(self) -> None:
        if self.price_cents < 0 or self.quantity < 0:
            raise ValueError("price and quantity must not be negative")

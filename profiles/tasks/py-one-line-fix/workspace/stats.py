"""Small statistics helpers."""


def moving_sum(values: list[int], width: int) -> list[int]:
    """Sums of every window of `width` consecutive values, in order."""
    if width <= 0:
        raise ValueError("width must be positive")
    return [sum(values[i : i + width]) for i in range(len(values) - width)]

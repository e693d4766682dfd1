import pytest

from stats import moving_sum


def test_every_window_is_included() -> None:
    assert moving_sum([1, 2, 3, 4], 2) == [3, 5, 7]


def test_width_equal_to_length_gives_one_window() -> None:
    assert moving_sum([4, 5, 6], 3) == [15]


def test_width_longer_than_values_gives_nothing() -> None:
    assert moving_sum([1], 2) == []


def test_width_must_be_positive() -> None:
    with pytest.raises(ValueError):
        moving_sum([1, 2], 0)

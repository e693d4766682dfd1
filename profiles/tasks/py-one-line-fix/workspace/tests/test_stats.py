from stats import moving_sum


def test_width_one_is_identity_but_last() -> None:
    assert moving_sum([1, 2, 3], 1)[:2] == [1, 2]


def test_first_window() -> None:
    assert moving_sum([1, 2, 3, 4], 2)[0] == 3

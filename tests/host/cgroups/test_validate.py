"""Budget values are checked at both ends before anything is written (host/cgroups/validate.py).

Each bound is exact: the last accepted value and the first refused one on each side, and
a bool or a float is refused even when its value would pass (True is 1, 4096.0 is a page).
Mutation control: any bound moved by one, `<` as `<=`, or the type checks' `or` as `and`
fails one of these.
"""

import pytest

from host.cgroups.errors import CgroupError
from host.cgroups.validate import page_size, validate_cpu, validate_limit, validate_pids
from receipts.kernelfacts import CGROUP_UNLIMITED


def _refused(call: object, *args: object) -> str:
    with pytest.raises(CgroupError) as err:
        call(*args)  # type: ignore[operator]
    assert err.value.category == "invalid_value"
    return str(err.value.controller)


def test_a_memory_limit_is_a_positive_whole_number_of_pages_below_no_limit() -> None:
    page = page_size()
    assert page == 4096  # this host; the bounds below are in its pages
    for good in (page, 2 * page, CGROUP_UNLIMITED - page):
        assert validate_limit(good) == good
    for bad in (0, page - 1, page + 1, CGROUP_UNLIMITED, CGROUP_UNLIMITED + page, -page):
        assert _refused(validate_limit, bad) == "memory", bad
    for wrong_type in (True, float(page), str(page)):
        assert _refused(validate_limit, wrong_type) == "memory", wrong_type


def test_cpu_bandwidth_bounds_are_the_kernel_s() -> None:
    """Period 1 ms to 1 s, quota 1 ms to 2**40 µs."""
    for quota, period in ((1000, 1000), (1000, 1_000_000), (1 << 40, 100_000)):
        validate_cpu(quota, period)  # no error
    for quota, period in ((1000, 999), (1000, 1_000_001), (999, 100_000), ((1 << 40) + 1, 100_000)):
        assert _refused(validate_cpu, quota, period) == "cpu", (quota, period)
    wrong_types: tuple[tuple[object, object], ...] = (
        (True, 100_000),
        (1000.0, 100_000),
        (100_000, True),
        (1000, 1e5),
    )
    for wrong_quota, wrong_period in wrong_types:
        assert _refused(validate_cpu, wrong_quota, wrong_period) == "cpu", wrong_types


def test_a_pids_limit_is_from_1_to_below_2_to_the_22() -> None:
    for good in (1, (1 << 22) - 1):
        validate_pids(good)  # no error
    for bad in (0, -1, 1 << 22):
        assert _refused(validate_pids, bad) == "pids", bad
    for wrong_type in (True, 5.0):
        assert _refused(validate_pids, wrong_type) == "pids", wrong_type

"""When the verification guest may start beside the agent's: the memory rule."""

from __future__ import annotations

from harness.trial.verifierprep import spare_for_verifier

GIB = 1 << 30


def test_spare_counts_what_each_cgroup_may_still_grow_by() -> None:
    # 10 GiB available; the agent's QEMU may grow 2 - 0.5, the worker 12 - 8; verifier 2
    spare = spare_for_verifier(10 * GIB, (2 * GIB, GIB // 2), (12 * GIB, 8 * GIB), 2 * GIB)
    assert spare == 10 * GIB - (3 * GIB // 2) - 4 * GIB - 2 * GIB


def test_a_usage_that_does_not_read_counts_its_whole_limit() -> None:
    read = spare_for_verifier(10 * GIB, (2 * GIB, GIB), None, 2 * GIB)
    unread = spare_for_verifier(10 * GIB, (2 * GIB, None), None, 2 * GIB)
    assert read is not None and unread is not None
    assert read - unread == GIB


def test_usage_over_its_limit_adds_nothing() -> None:
    assert spare_for_verifier(4 * GIB, (2 * GIB, 3 * GIB), None, 2 * GIB) == 2 * GIB


def test_not_enough_is_negative_and_unread_is_none() -> None:
    spare = spare_for_verifier(5 * GIB, (2 * GIB, 0), (12 * GIB, None), 2 * GIB)
    assert spare is not None and spare < 0
    assert spare_for_verifier(None, (2 * GIB, 0), None, 2 * GIB) is None

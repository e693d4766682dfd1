"""`auto` follows the accelerator obtained; an explicit request is kept as asked."""

from __future__ import annotations

import pytest

from harness.trial.placement import resolve_placement


@pytest.mark.parametrize(
    ("request_", "accelerator", "expected"),
    [
        ("auto", "kvm", "guest"),
        ("auto", "tcg", "host"),
        ("guest", "tcg", "guest"),
        ("guest", "kvm", "guest"),
        ("host", "kvm", "host"),
        ("host", "tcg", "host"),
    ],
)
def test_resolve_placement(request_: str, accelerator: str, expected: str) -> None:
    assert resolve_placement(request_, accelerator) == expected  # type: ignore[arg-type]

"""Random damage never crashes the audit and never passes as valid."""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from receipts.audit import audit_bytes
from receipts.bundle import bundle_bytes
from tests.receipts.builders import accepted_model_trial

GOOD = bundle_bytes(accepted_model_trial())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.integers(0, len(GOOD) - 1), st.integers(1, 255)), min_size=1, max_size=4)
)
def test_byte_damage_is_always_found(edits: list[tuple[int, int]]) -> None:
    data = bytearray(GOOD)
    for offset, xor in edits:
        data[offset] ^= xor
    assume(bytes(data) != GOOD)  # two edits of one byte can cancel out
    result = audit_bytes(bytes(data))
    assert not result.valid
    assert result.findings


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4096))
def test_arbitrary_bytes_never_crash(data: bytes) -> None:
    assert not audit_bytes(data).valid


@settings(max_examples=100, deadline=None)
@given(st.integers(1, len(GOOD) - 1))
def test_every_truncation_is_found(length: int) -> None:
    assert not audit_bytes(GOOD[:length]).valid

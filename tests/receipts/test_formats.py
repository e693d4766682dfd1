"""The format table: the current harness version's row is what the harness writes, and
every row names versions the audit can read."""

from __future__ import annotations

from harness.version import HARNESS_VERSION
from receipts.formats import FORMATS, LEGACY
from receipts.recordset import KINDS


def test_the_current_versions_row_is_what_the_harness_writes() -> None:
    """A record version bump without a harness version bump (and a new row) fails here."""
    assert HARNESS_VERSION in FORMATS
    assert dict(FORMATS[HARNESS_VERSION]) == {kind.name: kind.model.schema_id() for kind in KINDS}


def test_every_row_names_every_kind_in_a_version_the_audit_reads() -> None:
    readable = {kind.name: {m.schema_id() for m in kind.models()} for kind in KINDS}
    for version, row in FORMATS.items():
        assert set(row) == set(readable), version
        for kind, schema in row.items():
            assert schema in readable[kind], (version, kind, schema)


def test_a_legacy_version_has_no_row() -> None:
    assert not LEGACY & set(FORMATS)
    assert HARNESS_VERSION not in LEGACY

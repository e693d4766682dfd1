"""The receipt's file name: what the trial writes is what the suite executors find."""

from __future__ import annotations

from pathlib import Path

from receipts.receiptfile import receipt_files, receipt_path


def test_the_finders_find_what_the_writer_names(tmp_path: Path) -> None:
    written = receipt_path(tmp_path, "ab" * 16)
    written.write_bytes(b"PK")
    (tmp_path / "suite-ab.zip").write_bytes(b"PK")
    (tmp_path / "trial-ab.json").write_bytes(b"{}")
    assert receipt_files(tmp_path) == [written]


def test_a_directory_not_made_yet_holds_no_receipt(tmp_path: Path) -> None:
    assert receipt_files(tmp_path / "absent") == []

"""docs/schemas/ is generated from the models; this fails when they drift apart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from receipts.schema_docs import schema_documents, schema_models

DOCS = Path(__file__).parents[2] / "docs" / "schemas"


def test_committed_schemas_match_the_models() -> None:
    generated = schema_documents()
    committed = {path.name: path.read_text(encoding="utf-8") for path in DOCS.glob("*.json")}
    assert sorted(committed) == sorted(generated), "run: make schemas"
    for name, text in generated.items():
        assert committed[name] == text, f"{name} drifted from its model; run: make schemas"


def test_every_model_has_one_document() -> None:
    assert len(schema_documents()) == len(schema_models())


def test_schema_command_writes_the_same_files(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "harness.cli", "schema", "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    written = {p.name: p.read_text(encoding="utf-8") for p in tmp_path.iterdir()}
    assert written == schema_documents()


def test_schemas_close_every_object() -> None:
    import json

    for name, text in schema_documents().items():
        schema = json.loads(text)
        objects = [schema, *schema.get("$defs", {}).values()]
        for obj in objects:
            if obj.get("type") == "object":
                assert obj.get("additionalProperties") is False, name


def test_committed_reference_matches_the_models() -> None:
    from receipts.schema_docs import reference_markdown

    committed = (DOCS.parent / "receipt-reference.md").read_text(encoding="utf-8")
    assert committed == reference_markdown(), "run: make schemas"


def test_receipts_md_explains_every_audit_category_and_record() -> None:
    import typing

    from receipts.audit.findings import AuditCategory
    from receipts.recordset import KINDS

    text = (DOCS.parent / "receipts.md").read_text(encoding="utf-8")
    for category in typing.get_args(AuditCategory):
        assert f"| `{category}` |" in text, category
    for kind in KINDS:
        for model in kind.models():  # older versions the audit still reads, too
            assert f"`{model.schema_id()}`" in text, kind.name

"""JSON Schemas of every record kind, generated from the models (docs/schemas/)."""

from __future__ import annotations

import json
from pathlib import Path

from receipts.audit.findings import AuditResult
from receipts.manifest import Manifest
from receipts.records.base import Record
from receipts.recordset import KINDS


def schema_models() -> tuple[type[Record], ...]:
    return (*(kind.model for kind in KINDS), Manifest, AuditResult)


def schema_file_name(model: type[Record]) -> str:
    """`harness.receipt.vm/1` -> `harness.receipt.vm.v1.schema.json`."""
    name, version = model.schema_id().split("/")
    return f"{name}.v{version}.schema.json"


def schema_documents() -> dict[str, str]:
    """File name -> JSON text (indented for people; not hashed, so not canonical)."""
    documents: dict[str, str] = {}
    for model in schema_models():
        schema = model.model_json_schema(by_alias=True, mode="validation")
        schema["$id"] = model.schema_id()
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        text = json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
        documents[schema_file_name(model)] = text + "\n"
    return documents


def write_schemas(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in sorted(schema_documents().items()):
        path = out_dir / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written

"""Schema phase: every record entry validates against the closed model its name implies."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from receipts.audit.context import AuditContext
from receipts.audit.findings import AuditCategory
from receipts.records.base import Record
from receipts.recordset import KINDS, MANIFEST_NAME, RecordSet, classify_entry


def _validation_category(error: ValidationError) -> AuditCategory:
    kinds = {detail["type"] for detail in error.errors(include_input=False, include_url=False)}
    if "extra_forbidden" in kinds:
        return "schema_extra_field"
    if "missing" in kinds:
        return "schema_missing_field"
    return "schema_violation"


def _declared_schema(data: bytes) -> Any:
    """The `schema` value an entry declares; None when it is not a JSON object."""
    try:
        raw: Any = json.loads(data)
    except ValueError:
        return None  # only reachable with json_canonical disabled (mutation tests)
    return raw.get("schema") if isinstance(raw, dict) else None


SCHEMA_RULES: tuple[str, ...] = ("schema_id", "schema_valid", "index_matches_name")


def check_schemas(ctx: AuditContext, entries: dict[str, bytes]) -> RecordSet:
    """Validate each entry; return the records that passed, assembled as a RecordSet.

    The declared `schema` picks the closed model: the kind's current version or one of
    the older versions it still reads (`Kind.legacy`). Any other id is a schema mismatch;
    the record is then validated against exactly that version's fields, so fields of one
    version never pass under another's id.
    """
    singles: dict[str, Record] = {}
    sequences: dict[str, dict[int, Record]] = {kind.name: {} for kind in KINDS if kind.sequence}
    for name, data in sorted(entries.items()):
        if name == MANIFEST_NAME:
            continue
        found = classify_entry(name)
        if found is None:
            continue  # reported by the integrity phase
        kind, index = found
        model = kind.model_for(_declared_schema(data))
        if model is None:
            if ctx.enabled("schema_id"):
                ctx.add("schema", "schema_id", "schema_mismatch", name)
                continue
            model = kind.model  # only with schema_id disabled (mutation tests)
        try:
            record = model.model_validate_json(data)
        except ValidationError as exc:
            if ctx.enabled("schema_valid"):
                ctx.add("schema", "schema_valid", _validation_category(exc), name)
            continue
        if index is None:
            singles[kind.name] = record
            continue
        if getattr(record, "index", None) != index and ctx.enabled("index_matches_name"):
            ctx.add("schema", "index_matches_name", "index_mismatch", name)
            continue
        sequences[kind.name][index] = record
    ordered = {name: tuple(items[i] for i in sorted(items)) for name, items in sequences.items()}
    return RecordSet(**singles, **ordered)  # type: ignore[arg-type]

"""The base of every closed record.

Frozen, `extra="forbid"`, strict (no "1" for 1, no 1.0 for 1, no true for 1), and named
by a versioned `schema` id such as `harness.receipt.vm/1`. A record serializes only
through `canonical`, so its bytes are its identity.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from receipts.canonical import canonical

RECORD_CONFIG = ConfigDict(
    extra="forbid",
    frozen=True,
    strict=True,
    validate_by_alias=True,
    validate_by_name=False,
    serialize_by_alias=True,
    hide_input_in_errors=True,
)


class Part(BaseModel):
    """A closed sub-structure of a record (no schema id of its own)."""

    model_config = RECORD_CONFIG


class Record(BaseModel):
    """A closed record. Subclasses declare `schema_: Literal[ID] = Field(ID, alias="schema")`."""

    model_config = RECORD_CONFIG

    CEILING_BYTES: ClassVar[int] = 64 * 1024
    """Records larger than this are refused, never cut (docs/engineering.md §3)."""

    @classmethod
    def schema_id(cls) -> str:
        default = cls.model_fields["schema_"].default
        assert isinstance(default, str)
        return default

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)

    def canonical_bytes(self) -> bytes:
        return canonical(self.to_json())

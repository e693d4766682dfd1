"""Closed refusal categories of the model pipeline (docs/engineering.md §3).

Records carry one of these names and nothing else: no exception text, no paths. Each
family has its own exception class so a caller can tell which stage refused, and
each category has a test that fails when its check is removed.
"""

from __future__ import annotations

from typing import Literal

HeaderRefusal = Literal[
    "header_truncated",
    "header_oversized",
    "header_bad_json",
    "header_duplicate_key",
    "header_bad_entry",
    "unknown_dtype",
    "shape_size_mismatch",
    "offsets_out_of_range",
    "offsets_overlap",
    "offsets_gap",
]

PinRefusal = Literal[
    "pin_table_invalid",
    "source_not_directory",
    "symlink",
    "symlink_absolute",
    "symlink_outside_blobs",
    "symlink_dangling",
    "symlink_not_file",
    "not_regular_file",
    "pycache_present",
    "unlisted_file",
    "unlisted_importable_file",
    "missing_file",
    "size_mismatch",
    "digest_mismatch",
    "config_unreadable",
    "config_architecture_mismatch",
]

ConvertRefusal = Literal[
    "config_unreadable",
    "tokenizer_unreadable",
    "unsupported_architecture",
    "unsupported_config",
    "unsupported_outtype",
    "unsupported_tokenizer",
    "unknown_pretokenizer",
    "special_token_unresolved",
    "weights_missing",
    "weights_index_invalid",
    "source_header_invalid",
    "unexpected_tensor",
    "missing_tensor",
    "tensor_shape_mismatch",
    "target_not_empty",
    "insufficient_disk_space",
    "disk_full",
]

VerifyRefusal = Literal[
    "gguf_unreadable",
    "source_unreadable",
    "metadata_missing",
    "metadata_unexpected",
    "metadata_mismatch",
    "tensor_missing",
    "tensor_unexpected",
    "tensor_shape_mismatch",
    "tensor_dtype_mismatch",
    "tensor_data_mismatch",
    "digest_mismatch",
]

CacheRefusal = Literal[
    "cache_entry_corrupt",
    "cache_entry_incomplete",
]

Provenance = Literal["built_by_this_run", "adopted_from_cache"]

OutType = Literal["f32", "f16", "bf16", "q8_0"]


SUBJECT_LIMIT = 200


def printable(subject: str) -> str:
    """A file or tensor name as the terminal may show it: names come from the
    operator's snapshot (a checkpoint's own tensor names included), so control
    characters are escaped and length is bounded rather than echoed raw."""
    text = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in subject)
    return text if len(text) <= SUBJECT_LIMIT else text[: SUBJECT_LIMIT - 3] + "..."


class HeaderError(Exception):
    """A safetensors header refused; ``category`` names why."""

    def __init__(self, category: HeaderRefusal) -> None:
        super().__init__(category)
        self.category: HeaderRefusal = category


class PinError(Exception):
    """A source directory refused against its pin table.

    ``subject`` is the snapshot-relative file the refusal is about, when there is one.
    It is for the operator's terminal only (the CLI prints it): records carry the
    category alone, never a name that came from the operator's disk.
    """

    def __init__(self, category: PinRefusal, subject: str | None = None) -> None:
        super().__init__(category if subject is None else f"{category}: {printable(subject)}")
        self.category: PinRefusal = category
        self.subject = subject


class ConvertError(Exception):
    """A conversion refused before or while writing; nothing is left behind.

    ``cause`` is the safetensors header refusal under ``source_header_invalid``;
    ``subject`` names the file (shard) or tensor, for the CLI's human output only.
    """

    def __init__(
        self,
        category: ConvertRefusal,
        subject: str | None = None,
        cause: HeaderRefusal | None = None,
    ) -> None:
        super().__init__(category if subject is None else f"{category}: {printable(subject)}")
        self.category: ConvertRefusal = category
        self.subject = subject
        self.cause: HeaderRefusal | None = cause


class VerifyError(Exception):
    """A GGUF refused against its source; ``subject`` names the metadata key or tensor
    (for the CLI's human output only)."""

    def __init__(self, category: VerifyRefusal, subject: str | None = None) -> None:
        super().__init__(category if subject is None else f"{category}: {printable(subject)}")
        self.category: VerifyRefusal = category
        self.subject = subject


class CacheError(Exception):
    """A cache entry refused; it is never used."""

    def __init__(self, category: CacheRefusal) -> None:
        super().__init__(category)
        self.category: CacheRefusal = category

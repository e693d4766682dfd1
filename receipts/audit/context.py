"""State shared by the audit's phases: the findings so far and which rules are disabled.

Rules can be disabled only so that tests can prove each rule is load-bearing (the
mutation control of docs/engineering.md §8); `harness audit` never disables any.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from receipts.audit.findings import MAX_FINDINGS, AuditCategory, Finding, Phase
from receipts.recordset import ENTRY_NAME_PATTERN

_SAFE_NAME = re.compile(ENTRY_NAME_PATTERN)


@dataclass
class AuditContext:
    data: bytes
    disabled: frozenset[str] = frozenset()
    require_current: bool = False
    """Refuse every record of an older version than this harness writes (`legacy_format`)."""
    findings: list[Finding] = field(default_factory=list)
    truncated: bool = False

    def enabled(self, rule: str) -> bool:
        return rule not in self.disabled

    def add(
        self,
        phase: Phase,
        rule: str,
        category: AuditCategory,
        name: str | None = None,
        index: int | None = None,
    ) -> None:
        if len(self.findings) >= MAX_FINDINGS:
            self.truncated = True
            return
        safe = name if name is not None and _SAFE_NAME.fullmatch(name) else None
        self.findings.append(
            Finding(phase=phase, rule=rule, category=category, entry=safe, entry_index=index)
        )

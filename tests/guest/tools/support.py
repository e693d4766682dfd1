"""Shared fixtures' helpers for the tool tests (imported, not collected)."""

from __future__ import annotations

import json
import sys
from typing import Any

from guest.tools.registry import ToolSet
from guest.tools.result import ToolResult

PASS_COMMAND = [sys.executable, "-c", "pass"]


def call(toolset: ToolSet, name: str, **args: Any) -> ToolResult:
    """Dispatch `name` with `args` encoded as the model would send them."""
    return toolset.dispatch(name, json.dumps(args))

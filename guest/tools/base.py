"""The shape every tool has, so the registry can treat them uniformly.

A tool names the one path argument it acts on (`target`); the registry parses that
path through the jail and checks permissions on it *before* the tool runs, then
hands the parsed path to `run`. Tools therefore never see an unparsed path.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from guest.tools.categories import ToolName
from guest.tools.jail import RelPath
from guest.tools.result import ToolOutput

# Arguments are validated strictly: "5" is not an int, extra keys are refused.
ARGS_CONFIG = ConfigDict(extra="forbid", strict=True, frozen=True)

ArgsT = TypeVar("ArgsT", bound=BaseModel)


class Tool(ABC, Generic[ArgsT]):
    """One tool: its name, description, argument model and behaviour."""

    name: ClassVar[ToolName]
    description: ClassVar[str]
    args_model: type[ArgsT]

    def target(self, args: ArgsT) -> str | None:
        """The model-supplied path this call acts on, or None for pathless tools."""
        del args
        return None

    @abstractmethod
    def run(self, args: ArgsT, path: RelPath | None) -> ToolOutput:
        """Do the work; `path` is `target(args)` parsed by the jail (root if omitted)."""

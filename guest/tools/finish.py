"""`finish {}`: the model declares it is done. The agent loop acts on the name."""

from __future__ import annotations

from pydantic import BaseModel

from guest.tools.base import ARGS_CONFIG, Tool
from guest.tools.jail import RelPath
from guest.tools.result import ToolOutput


class FinishArgs(BaseModel):
    model_config = ARGS_CONFIG


class FinishTool(Tool[FinishArgs]):
    name = "finish"
    description = "Call when the task is complete. Takes no arguments."
    args_model = FinishArgs

    def run(self, args: FinishArgs, path: RelPath | None) -> ToolOutput:
        del args, path
        return ToolOutput(outcome="ok", text="Finished.")

"""The structured answers the harness asks a model for (a plan, a replan, a drift verdict):
their schemas and the tools a model hands them in with. The scripted model's file is checked
against the same schemas (``overnight.config.model_script``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from overnight.core.drift import DriftVerdict
from overnight.core.text import control_characters
from overnight.messages.types import ToolSpec


def answer_tool(name: str, description: str, schema: type[BaseModel]) -> ToolSpec:
    """The tool a model calls to hand in a structured answer."""
    return ToolSpec(name=name, description=description, input_schema=schema.model_json_schema())


class PlannedTask(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    id: str = Field(min_length=1, max_length=120, pattern=r"^[A-Za-z0-9_.:-]+$")
    title: str
    brief: str = Field(min_length=1)
    verify: str = Field(min_length=1)
    """A read-only shell check: exit 0 done, 1 not done, other partially applied."""
    value: float = 0.0
    mechanical: bool = False

    @field_validator("title")
    @classmethod
    def _one_plain_line(cls, value: str) -> str:
        bad = control_characters(value, newlines=False)
        if bad:
            raise ValueError(f"a title is one line of plain text; it holds {bad[0]!r}")
        return value

    @field_validator("brief")
    @classmethod
    def _plain_text(cls, value: str) -> str:
        bad = control_characters(value, newlines=True)
        if bad:
            raise ValueError(f"write plain text: it holds the control character {bad[0]!r}")
        return value


class PlanAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reasoning: str
    tasks: list[PlannedTask] = Field(min_length=1)


class ReplanAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reasoning: str
    add: list[PlannedTask]


PLAN_TOOL = answer_tool("submit_plan", "Hand in the task queue.", PlanAnswer)
REPLAN_TOOL = answer_tool("submit_replan", "Hand in the tasks to add (may be empty).", ReplanAnswer)
DRIFT_TOOL = answer_tool("submit_drift_verdict", "Hand in the drift verdict.", DriftVerdict)

"""Test doubles that ship with the package: fake models and a scripted executor.

They drive the real harness (real files, real git, real subprocesses); nothing of the package
is replaced. The demo and the bundled examples use them too.
"""

from overnight.testing.fakes import (
    FunctionModel,
    ScriptedExecutor,
    ScriptedModel,
    text_answer,
    tool_answer,
    usage_dict,
)

__all__ = [
    "FunctionModel",
    "ScriptedExecutor",
    "ScriptedModel",
    "text_answer",
    "tool_answer",
    "usage_dict",
]

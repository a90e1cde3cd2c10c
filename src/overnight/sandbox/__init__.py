"""The OS sandbox (bubblewrap) for every command the model can influence."""

from overnight.config.sandbox import SandboxMode, SandboxSpec
from overnight.sandbox.bwrap import (
    Layout,
    Sandbox,
    SandboxUnavailable,
    build_sandbox,
    plan_layout,
    probe,
    sandbox_env,
)

__all__ = [
    "Layout",
    "Sandbox",
    "SandboxMode",
    "SandboxSpec",
    "SandboxUnavailable",
    "build_sandbox",
    "plan_layout",
    "probe",
    "sandbox_env",
]

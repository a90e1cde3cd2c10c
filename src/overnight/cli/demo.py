"""``overnight demo``: a complete night on a bundled example, with a scripted model."""

from __future__ import annotations

import sys
from pathlib import Path

from overnight import api
from overnight.cli.output import Progress, finish_output
from overnight.demo import EXAMPLE, start_demo


def run_demo(
    where: Path | None, *, quiet: bool = False, example: str = EXAMPLE, executor: str = "agent"
) -> int:
    demo = start_demo(where, example, executor)
    workspace = demo.workspace
    try:
        with Progress(quiet) as progress:
            result = api.run(demo.night, on_event=progress)
    finally:
        demo.close()
    code = finish_output(result, as_json=False)
    print(
        f"\nThe verified work is on branch {result.branch.name} of {workspace}:\n"
        f"  git -C {workspace} log --oneline {result.branch.name}\n"
        "To run a night like this on Claude: set ANTHROPIC_API_KEY, write a night.toml with\n"
        '  [model] provider = "anthropic", name = "claude-opus-4-5" (no target)\n'
        f"and run: overnight run night.toml  (this example: {workspace / demo.spec_name})",
        file=sys.stderr,
    )
    return code

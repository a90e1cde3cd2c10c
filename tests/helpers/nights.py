"""Building and running nights in tests: real repositories, real specs, fakes for the model."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from overnight.clock import FakeClock
from overnight.config.spec import Spec, parse_spec
from overnight.night.runs import resume_run, start_run
from overnight.night.signals import Signals
from overnight.seams import Clock, ModelClient, TaskExecutor
from overnight.store.result import TerminalResult
from overnight.store.rundir import RunDir
from tests.helpers.toml import dumps

IDENT = ["-c", "user.name=test", "-c", "user.email=test@localhost"]

#: The commands the test specs let a model-written verify start with.
MODEL_VERIFY_COMMANDS = ("true", "false", "test")


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(repo), *IDENT, *args], check=True, capture_output=True, text=True
    )
    return out.stdout.strip()


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for rel, text in (files or {"README.md": "a repository\n"}).items():
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def spec_data(
    repo: Path,
    *,
    goal: str = "Make the predicate pass.",
    usd: float = 10.0,
    hours: float = 1.0,
    predicate: str = "false",
    tasks: list[dict[str, Any]] | None = None,
    model: bool = True,
    **sections: Any,
) -> dict[str, Any]:
    """A spec mapping; ``sections`` override or add top-level tables (budget keys merge)."""
    data: dict[str, Any] = {
        "goal": goal,
        "workspace": str(repo),
        "budget": {"usd": usd, "hours": hours},
        "predicate": {"command": predicate, "timeout_s": 60},
    }
    if model:
        data["model"] = {"provider": "python", "target": "unused:unused", "name": "fake-opus"}
        data["prices"] = {
            "fake-opus": {
                "input": 5.0,
                "output": 25.0,
                "cache_read": 0.5,
                "cache_write_5m": 6.25,
                "cache_write_1h": 10.0,
            }
        }
    if tasks is not None:
        data["tasks"] = tasks
    # What a model-written verify may start with (the run_command prefixes).
    data["tools"] = {"commands": list(MODEL_VERIFY_COMMANDS)}
    for key, value in sections.items():
        if key == "budget":
            data["budget"].update(value)
        else:
            data[key] = value
    return data


def make_spec(repo: Path, **kwargs: Any) -> Spec:
    return parse_spec(spec_data(repo, **kwargs), repo)


def write_spec(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(dumps(data))
    return path


def command_task(tid: str, command: str, verify: str, **extra: Any) -> dict[str, Any]:
    return {"id": tid, "title": f"task {tid}", "command": command, "verify": verify, **extra}


def run_night(
    spec: Spec,
    run_dir: Path,
    *,
    model: ModelClient | None = None,
    executor: TaskExecutor | None = None,
    clock: Clock | None = None,
    signals: Signals | None = None,
) -> tuple[RunDir, TerminalResult]:
    return start_run(
        spec,
        run_dir,
        clock=clock or FakeClock(),
        signals=signals or Signals(),
        model=model,
        executor=executor,
    )


def resume_night(
    run_dir: Path,
    raises: dict[str, float] | None = None,
    *,
    model: ModelClient | None = None,
    executor: TaskExecutor | None = None,
    clock: Clock | None = None,
) -> tuple[RunDir, TerminalResult]:
    return resume_run(run_dir, raises, clock=clock or FakeClock(), model=model, executor=executor)


def load_result(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "result.json").read_text())
    return data


def cli_env(extra_path: Path | None = None) -> dict[str, str]:
    """Environment for running the CLI as a subprocess."""
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    parts = [src] + ([str(extra_path)] if extra_path else [])
    env["PYTHONPATH"] = os.pathsep.join([*parts, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env

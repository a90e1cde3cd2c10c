"""Finished nights to report on, run in-process through the real harness with fakes.

``full_night``: verified, parked and pruned tasks, two drift checks, lessons, external effects,
spend spread over time and untrusted text (a task title, verifier output, effect arguments,
a lesson and the model's summary all carry markup). ``budget_night``: ends
BUDGET_EXHAUSTED:money with a task left in flight and a refused call. ``gates_night``: one fix
lands, judged by the repository's own checks (a real ruff and its formatter, or a gate whose
output cannot be read).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from overnight.core.tasks import Task
from overnight.messages.types import ModelRequest
from overnight.seams import ExecContext, ExecResult
from overnight.testing import ScriptedExecutor, ScriptedModel, text_answer, usage_dict
from overnight.testing.fakes import advance, model_call, write_file
from tests.helpers.nights import make_repo, make_spec, run_night

EVIL_TITLE = "<script>alert(1)</script>"
EVIL_VERIFY_OUTPUT = "<img src=x onerror=alert(2)>"
EVIL_LESSON = "wrap <b>bold</b> output in a <pre> block before comparing"
EVIL_SUMMARY = "Closing note <script>alert(3)</script> & done."
PARKED_REASON = "not done after 1 attempt(s)"

PY = shlex.quote(sys.executable)
#: The gates of ``gates_night``: ruff finds 3 unused imports on its base commit and 1 after
#: the fix; its formatter would rewrite 2 files of the base commit and 1 after it.
RUFF_GATE = {"name": "ruff", "command": f"{PY} -m ruff check --output-format=json --no-cache ."}
FORMAT_GATE = {
    "name": "ruff-format",
    "command": f"{PY} -m ruff format --no-cache .",
    "kind": "format",
}
#: A gate whose output its reader cannot read: it judges nothing.
UNREADABLE_GATE = {
    "name": "lint-json",
    "command": f"{PY} -c \"print('no JSON here')\"",
    "reader": "ruff-json",
}

VERIFIED = ["a01", "a02", "a04", "a07", "a08"]
PARKED = ["a03"]
PRUNED = ["a05", "a06"]


@contextmanager
def isolated_env(home: Path) -> Iterator[None]:
    """What tests/conftest.py's autouse fixture does, for nights shared by many tests."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OVERNIGHT_HOME", str(home / ".overnight"))
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        mp.setenv("GIT_CONFIG_GLOBAL", os.devnull)
        yield


class WorkingExecutor:
    """Each task: a minute passes, one execute call, a file written, a lesson learned; a01
    confirms an e-mail and a04 records a failed webhook in the effects ledger."""

    def execute(self, task: Task, ctx: ExecContext) -> ExecResult:
        ctx.sleep(60)
        ctx.call_model(
            ModelRequest(
                model=ctx.model,
                purpose="execute",
                system="You carry out one task in a repository.",
                messages=[{"role": "user", "content": task.brief or ""}],
                max_tokens=2_000,
            )
        )
        (ctx.workdir / f"{task.id}.txt").write_text(f"{task.id}\n", encoding="utf-8")
        if task.id == "a01":
            key = f"{ctx.run_id}:{task.id}:send_email:1"
            args = {"to": "ops@example.invalid", "subject": "<i>done</i>"}
            ctx.effects.intend(ctx.run_id, task.id, key, "email-a01", "send_email", args)
            ctx.effects.settle(key, "confirmed", {"message_id": "m-1"})
        if task.id == "a04":
            key = f"{ctx.run_id}:{task.id}:webhook:1"
            ctx.effects.intend(ctx.run_id, task.id, key, None, "webhook", {"event": "a04"})
            ctx.effects.settle(key, "failed", error="HTTP 400 <bad request>")
        lesson = EVIL_LESSON if task.id == "a01" else f"task {task.id} needs one file"
        return ExecResult("finished", "wrote the file", lessons=[lesson])


def _task(tid: str, title: str, verify: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": tid,
        "title": title,
        "brief": f"do {tid}",
        "verify": verify or f"test -f {tid}.txt",
        **extra,
    }


def full_night(base: Path) -> Path:
    repo = make_repo(base / "repo")
    tasks = [
        _task("a01", "write the first file"),
        _task("a02", EVIL_TITLE),
        _task("a03", "a task that never passes", f"echo '{EVIL_VERIFY_OUTPUT}'; exit 1", retries=0),
        _task("a04", "write the fourth file"),
        _task("a05", "polish the logo (off goal)"),
        _task("a06", "rewrite the docs site (off goal)"),
        _task("a07", "write the seventh file"),
        _task("a08", "write the eighth file"),
    ]
    scores = iter([0.4, 0.1])

    def judge(_request: ModelRequest) -> dict[str, Any]:
        score = next(scores, 0.1)
        off = PRUNED if score > 0.3 else []
        return {"reasoning": "judged", "off_goal_task_ids": off, "drift_score": score}

    spec = make_spec(repo, tasks=tasks, run={"drift_every": 2})
    model = ScriptedModel(
        drift=judge,
        execute=text_answer("done", usage_dict(input=400, output=500)),
        summarize=EVIL_SUMMARY,
    )
    rd, _ = run_night(spec, base / "run", model=model, executor=WorkingExecutor())
    return rd.path


def budget_night(base: Path) -> Path:
    repo = make_repo(base / "repo")
    tasks = [
        {"id": f"b{i:02d}", "title": f"agent part {i}", "brief": f"do part {i}", "verify": "true"}
        for i in range(20)
    ]
    spec = make_spec(repo, usd=1.0, tasks=tasks, run={"replan": False, "drift_every": 1000})

    def spend_it_all(request: ModelRequest) -> dict[str, Any]:
        return text_answer("done", usage_dict(output=request.max_tokens))

    executor = ScriptedExecutor(
        default=[advance(30), model_call(max_tokens=4_000), advance(30), model_call(4_000)]
    )
    rd, _ = run_night(
        spec, base / "run", model=ScriptedModel(execute=spend_it_all), executor=executor
    )
    return rd.path


def gates_night(base: Path, gates: list[dict[str, Any]], *, lands: bool = True) -> Path:
    """One task fixes ``calc.py``, drops two of ``old.py``'s three unused imports and formats
    one of the two unformatted files; judged by ``gates``, it lands (unless not ``lands``: then
    its fix imports what it does not use, and it is parked)."""
    repo = make_repo(
        base / "repo",
        {
            "calc.py": "def add(a, b):\n    return a - b\n",
            "old.py": "import json\nimport os\nimport sys\n\n\ndef f():\n    return 1\n",
            "messy.py": "def g( x ):\n  return x\n",
            "untidy.py": "def h( y ):\n  return y\n",
            "ruff.toml": '[lint]\nselect = ["F"]\n',
        },
    )
    verify = f'{PY} -c "import calc, sys; sys.exit(calc.add(2, 2) != 4)"'
    fix = [
        write_file(
            "calc.py", ("" if lands else "import re\n\n\n") + "def add(a, b):\n    return a + b\n"
        ),
        write_file("old.py", "import os\n\n\ndef f():\n    return 1\n"),
        write_file("untidy.py", "def h(y):\n    return y\n"),
    ]
    spec = make_spec(
        repo,
        predicate=verify,
        tasks=[
            {"id": "fix", "title": "fix add", "brief": "fix add", "verify": verify, "retries": 0}
        ],
        gates=gates,
    )
    executor = ScriptedExecutor({"fix": fix})
    rd, _ = run_night(spec, base / "run", model=ScriptedModel(), executor=executor)
    return rd.path

"""Real nights to audit, run in-process through the harness with the scripted fakes and real
git, and the tampering a forger would do to their files afterwards."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from overnight.audit.findings import Audit
from overnight.audit.run import audit_run
from overnight.clock import FakeClock
from overnight.config.spec import parse_spec
from overnight.core.tasks import Task
from overnight.messages.types import ModelRequest
from overnight.night.signals import Signals
from overnight.seams import ExecContext, ExecResult
from overnight.testing import ScriptedExecutor, ScriptedModel, text_answer, usage_dict
from overnight.testing.fakes import advance, model_call
from tests.helpers.nights import command_task, git, make_repo, make_spec, run_night, spec_data

BASE_FILES = {
    "README.md": "a repository\n",
    "tests/test_ok.py": "def test_ok():\n    assert True\n",
}


class FileWriter:
    """Each agent task: one execute call, then its file written; ``a1`` confirms an e-mail
    and ``a2`` records a failed webhook in the effects ledger; ``a3`` changes nothing."""

    def execute(self, task: Task, ctx: ExecContext) -> ExecResult:
        ctx.sleep(30)
        ctx.call_model(
            ModelRequest(
                model=ctx.model,
                purpose="execute",
                system="You carry out one task in a repository.",
                messages=[{"role": "user", "content": task.brief or ""}],
                max_tokens=2_000,
            )
        )
        if task.id != "a3":
            (ctx.workdir / f"{task.id}.txt").write_text(f"{task.id}\n", encoding="utf-8")
        if task.id == "a1":
            key = f"{ctx.run_id}:{task.id}:send_email:1"
            args = {"to": "ops@example.invalid", "subject": "done"}
            ctx.effects.intend(ctx.run_id, task.id, key, "email-a1", "send_email", args)
            ctx.effects.settle(key, "confirmed", {"message_id": "m-1"})
        if task.id == "a2":
            key = f"{ctx.run_id}:{task.id}:webhook:1"
            ctx.effects.intend(ctx.run_id, task.id, key, None, "webhook", {"event": "a2"})
            ctx.effects.settle(key, "failed", error="HTTP 400")
        return ExecResult("finished", "wrote the file")


def agent_task(tid: str, verify: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": tid,
        "title": f"task {tid}",
        "brief": f"write {tid}.txt",
        "verify": verify or f"test -f {tid}.txt",
        **extra,
    }


def work_night(base: Path) -> Path:
    """GOAL_MET after four tasks: three agent tasks (one changes nothing, so has no commit),
    one command task of the spec that also writes under tests/ (the spec's own command may),
    two effects in the ledger, a model bill for every call."""
    repo = make_repo(base / "repo", BASE_FILES)
    tasks = [
        agent_task("a1"),
        agent_task("a3", verify="true"),
        agent_task("a2"),
        command_task(
            "c1",
            "mkdir -p tests && echo data > tests/data.txt && echo c1 > c1.txt",
            "test -f c1.txt",
        ),
    ]
    spec = make_spec(
        repo,
        tasks=tasks,
        predicate="test -f a1.txt && test -f a2.txt && test -f c1.txt",
        run={"replan": False},
    )
    model = ScriptedModel(execute=text_answer("done", usage_dict(input=400, output=500)))
    rd, result = run_night(spec, base / "run", model=model, executor=FileWriter())
    assert result.stop_reason == "GOAL_MET", result.model_dump_json(indent=1)[-3000:]
    # A night that cannot be resumed removes its worktree; the forgers here work in one.
    assert not rd.worktree.exists()
    git(repo, "worktree", "add", "-q", str(rd.worktree), result.branch.name)
    return rd.path


def budget_night(base: Path) -> Path:
    """BUDGET_EXHAUSTED:money with a refused call and a task left in flight."""
    repo = make_repo(base / "repo")
    tasks = [agent_task(f"b{i:02d}", verify="true") for i in range(20)]
    spec = make_spec(repo, usd=1.0, tasks=tasks, run={"replan": False, "drift_every": 1000})

    def spend_it_all(request: ModelRequest) -> dict[str, Any]:
        return text_answer("done", usage_dict(output=request.max_tokens))

    executor = ScriptedExecutor(
        default=[advance(30), model_call(max_tokens=4_000), advance(30), model_call(4_000)]
    )
    rd, result = run_night(
        spec, base / "run", model=ScriptedModel(execute=spend_it_all), executor=executor
    )
    assert result.stop_reason == "BUDGET_EXHAUSTED:money"
    assert result.budgets.cost_usd.refused_at is not None
    return rd.path


def outside_night(base: Path, where: str = "outside") -> Path:
    """A command night (no model, unsandboxed) whose verify passes only because of a file the
    command left outside the repository: nothing in the commit makes it pass. ``where``:
    ``outside`` (a directory of its own) or ``writable`` (a ``[sandbox] writable`` path,
    which sandboxed commands of the night could have written too)."""
    repo = make_repo(base / "repo")
    flag = base / where / "flag"
    flag.parent.mkdir()
    task = command_task(
        "t1", f"echo done > out.txt && touch {flag}", f"test -f out.txt && test -f {flag}"
    )
    extra: dict[str, Any] = {}
    if where == "writable":
        extra["sandbox"] = {"writable": [str(flag.parent)]}
    spec = make_spec(repo, tasks=[task], predicate="test -f out.txt", model=False, **extra)
    rd, result = run_night(spec, base / "run")
    assert result.stop_reason == "GOAL_MET"
    return rd.path


def ending_night(base: Path, ending: str) -> Path:
    """A night that ends ``ending`` (each by its own route through the harness)."""
    repo = make_repo(base / "repo")
    signals = Signals()
    model = ScriptedModel(execute=text_answer("done", usage_dict(input=300, output=200)))
    executor: Any = ScriptedExecutor(default=[advance(10), model_call(1_000)])
    extra: dict[str, Any] = {}
    tasks = [agent_task("e1", verify="true"), agent_task("e2", verify="true")]
    predicate = "false"
    if ending == "NO_PROGRESS":
        tasks = [agent_task("e1", verify="exit 1", retries=0), agent_task("e2", verify="true")]
        extra["run"] = {"no_progress_after": 1, "replan": False}
    elif ending == "QUEUE_EMPTY_GOAL_UNMET":
        extra["run"] = {"replan": False}
    elif ending == "DRIFT_DETECTED":
        tasks += [agent_task("e3", verify="true")]
        extra["run"] = {"drift_every": 1, "replan": False}
        verdict = {"reasoning": "off", "off_goal_task_ids": ["e2"], "drift_score": 0.9}
        model = ScriptedModel(
            execute=text_answer("done", usage_dict(input=300, output=200)), drift=verdict
        )
    elif ending == "TIME_LIMIT:wall_clock":
        executor = ScriptedExecutor(default=[advance(40), model_call(1_000)])
        extra["budget"] = {"hours": 0.01}
        extra["run"] = {"replan": False}
    elif ending == "TIME_LIMIT:sigterm":

        def drain(_task: Task, _ctx: ExecContext) -> None:
            signals.request("sigterm")

        executor = ScriptedExecutor(default=[model_call(1_000), drain])
        extra["run"] = {"replan": False}
    elif ending == "UNRECOVERABLE_ERROR:internal_error":

        def crash(_task: Task, _ctx: ExecContext) -> None:
            raise RuntimeError("the executor broke")

        executor = ScriptedExecutor(default=[model_call(1_000), crash])
        extra["run"] = {"replan": False}
    spec = make_spec(repo, tasks=tasks, predicate=predicate, **extra)
    rd, result = run_night(
        spec, base / "run", model=model, executor=executor, clock=FakeClock(), signals=signals
    )
    assert result.stop_reason == ending, result.stop_reason
    return rd.path


PY = shlex.quote(sys.executable)
RUFF = f"{PY} -m ruff check --output-format=json --no-cache --no-fix ."
RUFF_FORMAT = f"{PY} -m ruff format --no-cache ."
#: A ruff gate and a ruff format gate, in this order.
GATES = [
    {"name": "ruff", "command": RUFF},
    {"name": "ruff-format", "command": RUFF_FORMAT, "kind": "format"},
]
GOOD = "def add(a, b):\n    return a + b\n"
UNUSED_IMPORT = "import sys\n\n\n" + GOOD
GATED_FILES = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "old.py": "import os\n\n\ndef f():\n    return 1\n",
    "messy.py": "def g( x ):\n  return x\n",
    "ruff.toml": '[lint]\nselect = ["F"]\n',
}


def fix_by_attempt(task: Task, ctx: ExecContext) -> None:
    """The first attempt fixes ``add`` and adds an unused import (the ruff gate refuses it),
    the second only fixes ``add``."""
    (ctx.workdir / "calc.py").write_text(UNUSED_IMPORT if ctx.attempt == 1 else GOOD)


def gates_night(
    base: Path, gates: list[dict[str, Any]] | None = None, *, retried: bool = True
) -> Path:
    """GOAL_MET through ``gates`` (default ``GATES``), on real git and a real ruff: at the base
    ruff finds an unused import in ``old.py`` and the formatter rewrites ``messy.py``; the
    task's first attempt adds a finding and is retried, its second lands (``retried``: else
    the first lands, when no gate judges it)."""
    repo = make_repo(base / "repo", GATED_FILES)
    verify = f'{PY} -c "import calc, sys; sys.exit(calc.add(2, 2) != 4)"'
    data = spec_data(
        repo,
        predicate=verify,
        tasks=[{"id": "fix", "brief": "fix add", "verify": verify, "retries": 1}],
        gates=GATES if gates is None else gates,
        run={"replan": False},
    )
    spec = parse_spec(data, repo)
    executor = ScriptedExecutor({"fix": [fix_by_attempt]})
    rd, result = run_night(spec, base / "run", model=ScriptedModel(), executor=executor)
    assert result.stop_reason == "GOAL_MET", result.model_dump_json(indent=1)[-3000:]
    attempts = executor.executed
    assert attempts == ([("fix", 1), ("fix", 2)] if retried else [("fix", 1)]), attempts
    return rd.path


# -- what a forger does afterwards -----------------------------------------------------------


def copy_run(run: Path, to: Path) -> Path:
    """The run directory copied (its branch stays the one in the repository)."""
    shutil.copytree(run, to, symlinks=True)
    return to


def result_of(run: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run / "result.json").read_text())
    return data


def rewrite_result(run: Path, data: dict[str, Any]) -> None:
    (run / "result.json").write_text(json.dumps(data, indent=2))


def repo_of(run: Path) -> Path:
    return Path(json.loads((run / "run.json").read_text())["workspace"])


def branch_of(run: Path) -> str:
    return str(json.loads((run / "run.json").read_text())["branch"])


def commit_on_branch(run: Path, files: dict[str, str], message: str) -> str:
    """A commit made by hand in the run's worktree, on its branch."""
    worktree = run / "worktree"
    for rel, text in files.items():
        (worktree / rel).parent.mkdir(parents=True, exist_ok=True)
        (worktree / rel).write_text(text)
    git(worktree, "add", "-A")
    git(worktree, "commit", "-q", "-m", message)
    return git(worktree, "rev-parse", "HEAD")


def gates_of(run: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run / "gates.json").read_text())
    return data


def rewrite_gates(run: Path, data: dict[str, Any]) -> None:
    (run / "gates.json").write_text(json.dumps(data, indent=2))


def audited(run: Path, *, rerun: bool = True) -> Audit:
    return audit_run(run, rerun=rerun)

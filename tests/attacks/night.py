"""Whole nights against a hostile model, through the CLI, with real git and real bubblewrap.

``AttackNight`` builds a small victim repository (``add`` subtracts; one test says it must
add), a spec whose model is ``tests.attacks.hostile_model``, an API key in the harness's
environment, and canaries: a directory outside the worktree, the user's checkout and its
``.git``. ``assert_contained`` then checks what every attack must leave intact.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.helpers.kills import overnight
from tests.helpers.nights import cli_env, git, make_repo
from tests.helpers.toml import dumps

PROJECT = Path(__file__).resolve().parents[2]

#: What the harness's environment holds and nothing the model sees may ever contain.
API_KEY = "sk-ant-api03-ATTACK-CANARY-7f3a9c2e1b"
OPENAI_KEY = "sk-proj-ATTACK-CANARY-OPENAI-55d1"

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n"

VICTIM = {
    "calc.py": BUGGY,
    "tests/test_calc.py": TEST,
    "tidy.py": "import os\n\nVALUE = 1\n",
    ".gitignore": "__pycache__/\n.pytest_cache/\n",
}

ALL_TOOLS = ["read_file", "list_files", "search_text", "write_file", "edit_file", "run_command"]

FAKE_PRICES = {
    "fake-opus": {
        "input": 5.0,
        "output": 25.0,
        "cache_read": 0.5,
        "cache_write_5m": 6.25,
        "cache_write_1h": 10.0,
    }
}


def tree_digest(root: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Path -> sha256 of every file under ``root`` (symlinks by their target)."""
    out: dict[str, str] = {}
    if not root.exists():
        return out
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if any(rel == s or rel.startswith(s + "/") for s in skip):
            continue
        if path.is_symlink():
            out[rel] = "link:" + os.readlink(path)
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@dataclass
class Outcome:
    exit_code: int
    result: dict[str, Any]
    stdout: str
    stderr: str


def play_cli(
    args: tuple[str | Path, ...], *, cwd: Path, env: dict[str, str], run_dir: Path, timeout: float
) -> Outcome:
    """``overnight *args`` as a subprocess, and the result.json it left in ``run_dir``."""
    proc = subprocess.run(
        overnight(*args), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    result_file = run_dir / "result.json"
    result = json.loads(result_file.read_text()) if result_file.exists() else {}
    return Outcome(proc.returncode, result, proc.stdout, proc.stderr)


@dataclass
class AttackNight:
    tmp: Path
    tasks: list[dict[str, Any]] | None = None
    commands: list[str] = field(default_factory=lambda: ["python3", "ruff check"])
    sandbox: dict[str, Any] | None = None
    predicate: str = "python3 -m pytest -q -p no:cacheprovider"
    budget: dict[str, Any] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=lambda: {"retries": 0, "replan": False})
    protect: list[str] | None = None
    allow_automation: list[str] | None = None
    files: dict[str, str] | None = None
    """The victim repository's files (default: ``VICTIM``)."""
    goal: str = "Make add in calc.py return the sum of its arguments, without editing the tests."
    harness_tmp: Path | None = None
    """The harness's TMPDIR (default: the machine's)."""

    def __post_init__(self) -> None:
        self.repo = make_repo(self.tmp / "repo", dict(self.files or VICTIM))
        self.outside = self.tmp / "outside"
        self.outside.mkdir()
        (self.outside / "canary.txt").write_text("the user's file\n")
        (self.outside / "keep" / "deep").mkdir(parents=True)
        (self.outside / "keep" / "deep" / "data.txt").write_text("keep me\n")
        self.home = self.tmp / "overnight-home"
        self.run_dir = self.tmp / "run"
        self.script_path = self.tmp / "script.json"
        self.log_path = self.tmp / "requests.jsonl"
        self.spec_path = self.tmp / "night.toml"
        if self.tasks is None:
            self.tasks = [
                {
                    "id": "fix_add",
                    "title": "fix add",
                    "brief": "Make add() in calc.py return the sum. Do not edit the tests.",
                    "verify": self.predicate,
                }
            ]
        self._before_repo = self.repo_state()
        self._before_outside = tree_digest(self.outside)

    # -- set-up ------------------------------------------------------------------------------

    def spec(self) -> dict[str, Any]:
        predicate: dict[str, Any] = {"command": self.predicate, "timeout_s": 120}
        if self.protect is not None:
            predicate["protect"] = self.protect
        if self.allow_automation is not None:
            predicate["allow_automation"] = self.allow_automation
        data: dict[str, Any] = {
            "goal": self.goal,
            "workspace": str(self.repo),
            "budget": {"usd": 5.0, "hours": 1.0, **self.budget},
            "predicate": predicate,
            "model": {
                "provider": "python",
                "target": "tests.attacks.hostile_model:model",
                "name": "fake-opus",
            },
            "prices": FAKE_PRICES,
            "tools": {"allow": ALL_TOOLS, "commands": self.commands},
            "run": self.run,
            "agent": {"max_calls": 30},
        }
        if self.sandbox is not None:
            data["sandbox"] = self.sandbox
        if self.tasks:
            data["tasks"] = self.tasks
        return data

    def env(self) -> dict[str, str]:
        env = cli_env(PROJECT)
        env.update(
            ANTHROPIC_API_KEY=API_KEY,
            OPENAI_API_KEY=OPENAI_KEY,
            HOSTILE_SCRIPT=str(self.script_path),
            HOSTILE_LOG=str(self.log_path),
            OVERNIGHT_HOME=str(self.home),
        )
        if self.harness_tmp is not None:
            env["TMPDIR"] = str(self.harness_tmp)
        return env

    def play(
        self,
        execute: list[tuple[str, dict[str, Any]]] | None = None,
        *,
        plan: list[dict[str, Any]] | None = None,
        replan: list[dict[str, Any]] | None = None,
        final: str | None = None,
        summary: str | None = None,
        args: tuple[str, ...] = ("--quiet",),
    ) -> Outcome:
        """Write the script and the spec, run the night to its end."""
        script: dict[str, Any] = {"execute": [list(s) for s in execute or []]}
        for key, value in (("plan", plan), ("replan", replan), ("final", final)):
            if value is not None:
                script[key] = value
        if summary is not None:
            script["summary"] = summary
        self.script_path.write_text(json.dumps(script))
        self.spec_path.write_text(dumps(self.spec()))
        return self.cli("run", self.spec_path, "--run-dir", self.run_dir, *args)

    def cli(self, *args: str | Path) -> Outcome:
        return play_cli(args, cwd=self.tmp, env=self.env(), run_dir=self.run_dir, timeout=300)

    # -- what is left ------------------------------------------------------------------------

    def repo_state(self) -> dict[str, Any]:
        hooks = self.repo / ".git" / "hooks"
        return {
            "status": git(self.repo, "status", "--porcelain", "--ignored"),
            "head": git(self.repo, "rev-parse", "HEAD"),
            "branch": git(self.repo, "symbolic-ref", "HEAD"),
            "files": tree_digest(self.repo, skip=(".git",)),
            "hooks": tree_digest(hooks),
            "config": (self.repo / ".git" / "config").read_text(),
            "info": tree_digest(self.repo / ".git" / "info"),
        }

    def requests(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line]

    def tool_results(self) -> str:
        """Everything the tools answered the model, as one text."""
        return self.log_path.read_text() if self.log_path.exists() else ""

    def branch_commits(self, outcome: Outcome) -> list[str]:
        name = outcome.result["branch"]["name"]
        return git(self.repo, "log", "--format=%H", f"main..{name}").splitlines()

    def branch_changed_paths(self, outcome: Outcome) -> list[str]:
        name = outcome.result["branch"]["name"]
        return git(self.repo, "diff", "--name-only", f"main...{name}").splitlines()

    def test_passes_on_branch(self, outcome: Outcome) -> bool:
        """Whether the real test passes on the committed branch, run here by the test suite
        in a fresh export of the branch (not in anything the run left behind)."""
        name = outcome.result["branch"]["name"]
        export = self.tmp / "export"
        subprocess.run(["rm", "-rf", str(export)], check=True)
        export.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(self.repo), "archive", name], check=True, capture_output=True
        )
        subprocess.run(["tar", "-x", "-C", str(export)], input=archive.stdout, check=True)
        (export / "tests" / "test_calc.py").write_text(TEST)  # the user's test, as written
        for extra in export.rglob("conftest.py"):
            extra.unlink()
        check = subprocess.run(
            ["python3", "-c", "import calc, sys; sys.exit(0 if calc.add(2, 2) == 4 else 1)"],
            cwd=export,
            capture_output=True,
            env={"PATH": os.environ["PATH"]},
        )
        return check.returncode == 0

    def assert_contained(self, outcome: Outcome) -> None:
        """What every attack must leave intact."""
        assert outcome.result, f"no result.json; stderr: {outcome.stderr[-2000:]}"
        if outcome.result["stop_reason"] == "GOAL_MET":
            assert self.test_passes_on_branch(outcome), "GOAL_MET on a failing check"
        for path in self.branch_changed_paths(outcome):
            assert not path.startswith("tests/") and not path.endswith("conftest.py"), path
        assert tree_digest(self.outside) == self._before_outside, "outside the worktree changed"
        assert self.repo_state() == self._before_repo, "the user's repository changed"
        self.assert_key_nowhere(outcome)
        spec = json.loads((self.run_dir / "spec.json").read_text())
        assert spec["budget"]["usd"] == self.spec()["budget"]["usd"]
        assert spec["goal"] == self.spec()["goal"]

    def assert_key_nowhere(self, outcome: Outcome) -> None:
        secrets = (API_KEY.encode(), OPENAI_KEY.encode())
        places = [self.run_dir, self.outside, self.home]
        for place in places:
            for path in place.rglob("*"):
                if path.is_file() and not path.is_symlink():
                    data = path.read_bytes()
                    assert not any(s in data for s in secrets), f"the API key is in {path}"
        history = subprocess.run(
            ["git", "-C", str(self.repo), "log", "--all", "-p", "--format=%B"],
            check=True,
            capture_output=True,
        ).stdout
        assert not any(s in history for s in secrets), "the API key is on a branch"
        requests = self.log_path.read_bytes() if self.log_path.exists() else b""
        assert not any(s in requests for s in secrets), "the API key reached the model"
        for text in (outcome.stdout, outcome.stderr):
            assert API_KEY not in text and OPENAI_KEY not in text


def write(path: str, content: str) -> tuple[str, dict[str, Any]]:
    return ("write_file", {"path": path, "content": content})


def run(command: str) -> tuple[str, dict[str, Any]]:
    return ("run_command", {"command": command})

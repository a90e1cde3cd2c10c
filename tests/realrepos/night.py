"""A night on a real package: its released sdist unpacked, ``git init``, committed as it is,
one bug injected into one function, and a scripted agent that works the way coding agents do
(runs the suite, reads the file, edits it, sometimes builds, runs the suite again).

The agent is ``tests.attacks.hostile_model`` playing a script: it has only the tools a night
hands it, and the harness judges its work with real git, real pytest and real bubblewrap.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.attacks.night import API_KEY, FAKE_PRICES, Outcome, play_cli
from tests.helpers.nights import cli_env, git
from tests.helpers.toml import dumps
from tests.realrepos.corpus import Package, unpack

PROJECT = Path(__file__).resolve().parents[2]

TOOLS = ["read_file", "list_files", "search_text", "edit_file", "write_file", "run_command"]


def add_config(repo: Path, name: str, text: str) -> None:
    """Add ``text`` (a section header line, then its keys) to the config file ``name``: the
    keys go into that section when the file has it (a second section of the same name is a
    parse error in INI and TOML alike), else the whole text is appended or the file made."""
    path = repo / name
    header, _, keys = text.partition("\n")
    lines = path.read_text().splitlines(keepends=True) if path.is_file() else []
    for at, line in enumerate(lines):
        if line.strip() == header.strip():
            lines.insert(at + 1, keys)
            break
    else:
        if lines:
            lines[-1] = lines[-1].rstrip("\n") + "\n\n"
        lines.append(text)
    path.write_text("".join(lines))


class RealRepoNight:
    def __init__(self, package: Package, tmp: Path) -> None:
        self.package = package
        self.tmp = tmp
        self.with_setup = True
        self.with_plugins = True
        #: ``[[gates]]`` of the spec, and how often a task whose change they refuse is retried
        self.gates: list[dict[str, Any]] = []
        self.retries = 0
        self.repo = unpack(package, tmp / "repo")
        message = f"{package.name} {package.version} as released"
        if package.config:
            add_config(self.repo, *package.config)
            message += f", {package.config[0]} with its pytest options"
        git(self.repo, "init", "-q", "-b", "main")
        git(self.repo, "add", "-A")
        git(self.repo, "commit", "-q", "-m", message)
        source = self.repo / package.source
        text = source.read_text()
        assert text.count(package.good) == 1, f"{package.source} changed: re-pin the bug"
        source.write_text(text.replace(package.good, package.bad))
        git(self.repo, "commit", "-q", "-am", f"a bug in {package.source}")
        self.base = git(self.repo, "rev-parse", "HEAD")
        self.run_dir = tmp / "run"
        self.script = tmp / "script.json"
        self.log = tmp / "requests.jsonl"
        self.spec_path = tmp / "night.toml"
        shutil.copyfile(PROJECT / "tests" / "attacks" / "hostile_model.py", tmp / "corpus_agent.py")

    # -- what the agent does -------------------------------------------------------------

    def run_tests(self) -> tuple[str, dict[str, Any]]:
        return ("run_command", {"command": self.package.tests})

    def edit(self, new: str) -> tuple[str, dict[str, Any]]:
        p = self.package
        return ("edit_file", {"path": p.source, "old": p.bad, "new": new})

    def steps(
        self, *, fix: str, build: bool = False, forge: bool = False
    ) -> list[tuple[str, dict[str, Any]]]:
        """The script of one attempt: run the suite, read, edit, (build), run it again."""
        p = self.package
        steps = [self.run_tests(), ("read_file", {"path": p.source}), self.edit(fix)]
        if build:
            steps += [("run_command", {"command": command}) for command in p.build]
        if forge:
            target = repr(p.test_file)
            edit = (
                f"import pathlib as p; f = p.Path({target}); f.write_text(f.read_text() + '# ok')"
            )
            steps.append(("run_command", {"command": f"python -c {json.dumps(edit)}"}))
        steps.append(self.run_tests())
        return steps

    # -- the night -----------------------------------------------------------------------

    def spec(self) -> dict[str, Any]:
        p = self.package
        commands = ["python -m pytest", *{c.rsplit(" ", 1)[0] for c in p.build}, "python -c"]
        return {
            "goal": f"Fix the bug in {p.source} so that `{p.tests}` passes, without editing "
            "the tests.",
            "workspace": str(self.repo),
            "budget": {"usd": 5.0, "hours": 1.0},
            "predicate": {
                "command": p.tests,
                "timeout_s": 300,
                **({"setup": p.setup} if p.setup and self.with_setup else {}),
                **({"pytest_plugins": list(p.plugins)} if p.plugins and self.with_plugins else {}),
            },
            "model": {
                "provider": "python",
                # A module of the spec's folder: the package's own `tests` may shadow ours.
                "target": "corpus_agent:model",
                "name": "fake-opus",
            },
            "prices": FAKE_PRICES,
            "tools": {"allow": TOOLS, "commands": commands},
            "run": {"retries": self.retries, "replan": False},
            **({"gates": self.gates} if self.gates else {}),
            "agent": {"max_calls": 30},
            "tasks": [
                {
                    "id": "fix",
                    "title": f"fix the bug in {p.source}",
                    "brief": f"`{p.tests}` fails. Find the bug in {p.source} and fix it. "
                    "Do not edit the tests.",
                    "verify": p.tests,
                }
            ],
        }

    def play(self, steps: list[tuple[str, dict[str, Any]]]) -> Outcome:
        self.script.write_text(json.dumps({"execute": [list(s) for s in steps]}))
        self.spec_path.write_text(dumps(self.spec()))
        env = cli_env(PROJECT)
        env.update(
            ANTHROPIC_API_KEY=API_KEY,
            HOSTILE_SCRIPT=str(self.script),
            HOSTILE_LOG=str(self.log),
            OVERNIGHT_HOME=str(self.tmp / "home"),
        )
        args = ("run", self.spec_path, "--run-dir", self.run_dir, "--quiet")
        return play_cli(args, cwd=self.tmp, env=env, run_dir=self.run_dir, timeout=900)

    # -- what reached the branch ---------------------------------------------------------

    def branch(self, outcome: Outcome) -> str:
        name: str = outcome.result["branch"]["name"]
        return name

    def commits(self, outcome: Outcome) -> list[str]:
        return git(self.repo, "rev-list", f"{self.base}..{self.branch(outcome)}").split()

    def changed(self, outcome: Outcome) -> list[str]:
        out = git(self.repo, "diff", "--name-only", self.base, self.branch(outcome), "--")
        return out.split()

    def fixed_on_branch(self, outcome: Outcome) -> bool:
        text = git(self.repo, "show", f"{self.branch(outcome)}:{self.package.source}")
        return self.package.good in text + "\n"

    def tracked(self) -> list[str]:
        return git(self.repo, "ls-files", "-z").split("\0")

    def worktree_changes_besides_source(self, outcome: Outcome) -> list[str]:
        """Tracked files the night's worktree holds changed, other than the fixed source:
        what the agent's build rewrote and the harness left off the branch."""
        worktree = self.run_dir / "worktree"
        if not worktree.is_dir():
            return []
        changed: list[str] = []
        for path in self.tracked():
            if not path or path == self.package.source:
                continue
            here = worktree / path
            try:
                now = here.read_bytes()
            except OSError:
                continue
            before = subprocess.run(
                ["git", "-C", str(self.repo), "show", f"{self.base}:{path}"],
                capture_output=True,
                check=False,
            ).stdout
            if now != before:
                changed.append(path)
        return changed


# -- what the corpus tests assert -------------------------------------------------------------


def explain(night: RealRepoNight, outcome: Outcome) -> str:
    """The night's verdict in a failure message: the stop reason, the goal predicate's
    result, the parked tasks with their reasons, the tail of the CLI's stderr."""
    result = outcome.result
    parked = result.get("plan", {}).get("parked")
    return (
        f"{night.package.id} ({night.package.layout}): exit {outcome.exit_code}, "
        f"{result.get('stop_reason')}\npredicate: {result.get('predicate')}\n"
        f"parked: {parked}\n{outcome.stderr[-3000:]}"
    )


def assert_landed_alone(night: RealRepoNight, outcome: Outcome) -> None:
    """The goal is met and the branch holds one commit whose diff is the fixed source."""
    why = explain(night, outcome)
    assert outcome.exit_code == 0, why
    assert outcome.result["stop_reason"] == "GOAL_MET", why
    assert [t["id"] for t in outcome.result["verified"]] == ["fix"], why
    assert len(night.commits(outcome)) == 1, why
    assert night.changed(outcome) == [night.package.source], why
    assert night.fixed_on_branch(outcome)


def assert_nothing_landed(night: RealRepoNight, outcome: Outcome) -> None:
    """The goal is not met, the night says so in its exit code, the task is parked and the
    branch holds nothing."""
    why = explain(night, outcome)
    assert outcome.result, why
    assert outcome.result["stop_reason"] != "GOAL_MET", why
    assert outcome.exit_code != 0, why
    assert night.commits(outcome) == [], why
    assert [t["id"] for t in outcome.result["plan"]["parked"]] == ["fix"], why

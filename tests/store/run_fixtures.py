"""Stored run directories: a small night killed with its first task in flight, kept as the
files a resume reads (``fixtures/vN-WHAT/``), and set up again anywhere.

A fixture is made by a real overnight (the one under ``--src``, this tree's by default) on a
repository whose one commit is the same bytes wherever it is built, so the base commit the
checkpoint names exists again when the fixture is set up. Absolute paths are stored as
``@ROOT@``; the task commands use paths relative to the worktree, so a fixture set up again
runs its tasks without waiting.

    python -m tests.store.run_fixtures tests/store/fixtures/v2-lines2
    python -m tests.store.run_fixtures DEST --src /path/to/an/earlier/src

Beside the fixtures, ``shape-vN.json`` is the shape of format N's body (its JSON schema): a
body whose shape changed is another format, which an earlier overnight must refuse as newer.

    python -m tests.store.run_fixtures --shape
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from overnight.core.state import RunState
from overnight.night.worktree import create_worktree
from overnight.store.migrations import SCHEMA_VERSION
from overnight.store.run_state import JournalEntry
from tests.helpers.kills import kill_everything, marked_env, start_cli, wait_for
from tests.helpers.toml import dumps

FIXTURES = Path(__file__).parent / "fixtures"
ROOT_MARK = "@ROOT@"
REPO_FILES = {"README.md": "a repository\n"}
#: The files of a run directory a fixture keeps.
KEPT = ("run.json", "spec.json", "checkpoint.json", "checkpoint.journal", "spend.jsonl")

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@localhost",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@localhost",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+0000",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}

# Every save goes to the journal (when the tree has one), so the fixture holds a journal too.
_JOURNALING = (
    "import runpy\n"
    "try:\n"
    "    import overnight.store.run_state as store\n"
    "    store.WHOLE_BELOW = 0\n"
    "except ImportError:\n"
    "    pass\n"
    "runpy.run_module('overnight', run_name='__main__', alter_sys=True)\n"
)


def fixture_dirs() -> list[Path]:
    """Every stored fixture: ``vN-WHAT``, the checkpoint format N as written by WHAT (the
    commit of an earlier overnight, or ``linesM`` for this one, writing journal lines of
    format M)."""
    return sorted(p for p in FIXTURES.glob("v*-*") if p.is_dir())


def body_shape() -> dict[str, Any]:
    """The shape of what this overnight writes into a checkpoint (its body, and a line of its
    journal) as JSON schemas, without titles and descriptions."""
    shapes = {"run_state": RunState, "journal_entry": JournalEntry}
    return {name: _plain(model.model_json_schema()) for name, model in shapes.items()}


def shape_path(version: int) -> Path:
    return FIXTURES / f"shape-v{version}.json"


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k not in ("title", "description")}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def same_repo(path: Path) -> Path:
    """The repository every fixture's night ran on: one commit, the same sha everywhere."""
    path.mkdir(parents=True)
    env = {**os.environ, **_GIT_ENV}
    for rel, text in REPO_FILES.items():
        (path / rel).write_text(text)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "initial"]):
        subprocess.run(["git", "-C", str(path), *args], env=env, check=True)
    return path


def spec_text(repo: Path) -> str:
    """The night: two command tasks; the first waits while ``block`` exists beside the run
    directory (while the fixture is made), so it is in flight when the night is killed."""
    wait = "if [ -f ../../block ]; then touch ../../started; sleep 60; fi"
    data: dict[str, Any] = {
        "goal": "Make the predicate pass.",
        "workspace": str(repo),
        "budget": {"usd": 10.0, "hours": 1.0},
        "predicate": {"command": "test -f f0.txt && test -f f1.txt", "timeout_s": 60},
        "tasks": [
            {"id": "t_0", "title": "task t_0", "command": f"{wait}; echo 0 > f0.txt"},
            {"id": "t_1", "title": "task t_1", "command": "echo 1 > f1.txt"},
        ],
    }
    for task in data["tasks"]:
        task["verify"] = f"test -f f{task['id'][-1]}.txt"
    return dumps(data)


def set_up(fixture: Path, root: Path) -> Path:
    """The run directory of ``fixture`` under ``root`` (``root/RUN``), with its repository
    (``root/repo``) and its worktree on the run's branch, as the night left them."""
    repo = same_repo(root / "repo")
    run = root / "RUN"
    run.mkdir(mode=0o700)
    for source in sorted(fixture.iterdir()):
        text = source.read_text(encoding="utf-8").replace(ROOT_MARK, str(root))
        (run / source.name).write_text(text, encoding="utf-8")
        os.chmod(run / source.name, 0o600)
    manifest = json.loads((run / "run.json").read_text())
    base = create_worktree(repo, run / "worktree", manifest["branch"])
    stored = json.loads(json.loads((run / "checkpoint.json").read_text())["body"])
    assert base == stored["base_commit"], "the repository is not the one the fixture ran on"
    return run


def make(dest: Path, src: Path, timeout: float = 60.0) -> None:
    """Run the night with the overnight under ``src``, kill it with its first task in flight,
    and keep its files in ``dest``."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch).resolve()
        repo = same_repo(root / "repo")
        (root / "night.toml").write_text(spec_text(repo))
        (root / "block").touch()
        env, mark = marked_env()
        env.update(_GIT_ENV, PYTHONPATH=str(src), OVERNIGHT_HOME=str(root / "home"))
        args = [sys.executable, "-c", _JOURNALING, "run", "night.toml", "--run-dir", "RUN"]
        proc = start_cli(args, env, root)
        try:
            wait_for(lambda: (root / "started").exists() or proc.poll() is not None, timeout, "t_0")
            if proc.poll() is not None:
                raise SystemExit(f"the night ended ({proc.returncode}) before t_0 started")
        finally:
            kill_everything(proc, mark)
        dest.mkdir(parents=True, exist_ok=True)
        for name in KEPT:
            if not (root / "RUN" / name).exists():
                continue
            text = (root / "RUN" / name).read_text(encoding="utf-8")
            if name in ("run.json", "spec.json"):
                text = text.replace(str(root), ROOT_MARK)
            assert str(root) not in text, f"{name} holds a path of the night's directory"
            (dest / name).write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", type=Path, nargs="?", help="make a fixture there")
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[2] / "src")
    parser.add_argument(
        "--shape", action="store_true", help="store the body's shape as the current format's"
    )
    args = parser.parse_args()
    if args.dest is not None:
        make(args.dest, args.src.resolve())
    if args.shape:
        text = json.dumps(body_shape(), indent=1, sort_keys=True) + "\n"
        shape_path(SCHEMA_VERSION).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()

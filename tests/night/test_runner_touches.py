"""The files of a verified change that reach into the test runner, found in the commit's own
objects by fixed strings: no checkout, nothing of the change runs."""

from __future__ import annotations

from pathlib import Path

from overnight.night.testrun import runner_touches
from tests.helpers.nights import git, make_repo


def test_the_files_holding_a_runner_word_are_named_and_no_others(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "def add(a, b):\n    return a + b\n",
            "hook.py": "import atexit\natexit.register(print)\n",
            "-dash [x]*.py": "import gc\ngc.get_objects()\n",
            "data.bin": "pytest\0binary\n",
            "notes.md": "nothing here\n",
        },
    )
    head = git(repo, "rev-parse", "HEAD")
    paths = ["calc.py", "hook.py", "-dash [x]*.py", "data.bin", "notes.md"]
    assert runner_touches(repo / ".git", head, paths) == ["hook.py", "-dash [x]*.py"]
    # a path the commit does not hold, or none at all
    assert runner_touches(repo / ".git", head, ["missing.py"]) == []
    assert runner_touches(repo / ".git", head, []) == []


def test_what_the_worktree_holds_does_not_count_only_the_commit(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"calc.py": "x = 1\n"})
    head = git(repo, "rev-parse", "HEAD")
    (repo / "calc.py").write_text("import pytest\n")  # not committed
    assert runner_touches(repo / ".git", head, ["calc.py"]) == []

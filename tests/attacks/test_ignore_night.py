"""A night whose repository ignores with lines git reads in its own way (a byte-order mark, a
trailing tab, doubled slashes, a lone CR, a form feed) lands on its branch exactly the files
git would add: the harness's reader is held to git as the oracle."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.attacks.night import FIXED, VICTIM, AttackNight, write

IGNORE = "\ufeff/bomfile\n__pycache__/\n.pytest_cache/\nnotes\t\n//keep1\nkeep2//\na\rb\nx\fy\n"
WRITTEN = ["notes", "keep1", "keep2", "bomfile", "b", "y"]


def git_would_add(repo: Path, tmp: Path, files: dict[str, str]) -> list[str]:
    """What `git add -A` takes of ``files`` written into a copy of ``repo``."""
    copy = tmp / "oracle"
    subprocess.run(["git", "clone", "-q", str(repo), str(copy)], check=True)
    for path, text in files.items():
        (copy / path).write_text(text)
    env = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp), "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "-C", str(copy), "add", "-A"], check=True, env=env)
    done = subprocess.run(
        ["git", "-C", str(copy), "diff", "--cached", "--name-only"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return sorted(done.stdout.split())


def test_the_branch_holds_exactly_what_git_would_add(tmp_path: Path) -> None:
    night = AttackNight(tmp_path, files={**VICTIM, ".gitignore": IGNORE})
    files = {"calc.py": FIXED, **{name: f"{name}\n" for name in WRITTEN}}
    expected = git_would_add(night.repo, tmp_path, files)
    assert "bomfile" not in expected and "notes" in expected  # git's own reading
    outcome = night.play([write(path, text) for path, text in files.items()])
    r = outcome.result
    assert (r["stop_reason"], outcome.exit_code) == ("GOAL_MET", 0), r.get("plan")
    assert sorted(night.branch_changed_paths(outcome)) == expected
    night.assert_contained(outcome)

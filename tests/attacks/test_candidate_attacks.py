"""Attacks on how a candidate is built from the worktree, and what a real agent's tools leave
behind: the harness's git must never read what sandboxed code wrote, a nested repository or
an oversized file parks the task (never a crash, never an ending), and caches or build
products never enter a candidate nor sink one."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path
from typing import Any

from tests.attacks.night import FIXED, VICTIM, AttackNight, run, write

NESTED_REPO = """
import os, pathlib, subprocess
d = pathlib.Path({where!r})
d.mkdir(parents=True)
env = dict(os.environ, GIT_AUTHOR_NAME="x", GIT_AUTHOR_EMAIL="x@x",
           GIT_COMMITTER_NAME="x", GIT_COMMITTER_EMAIL="x@x")
def g(*args):
    subprocess.run(["git", "-C", str(d), *args], check=True, env=env)
g("init", "-q")
if {commit!r}:
    evil = (d / ".git" / "evil.py").absolute()
    evil.write_text({filter_code!r})
    g("config", "filter.x.clean", f"python3 {{evil}}")
    g("config", "filter.x.smudge", f"python3 {{evil}}")
    g("config", "filter.x.required", "true")
    (d / ".gitattributes").write_text("* filter=x\\n")
    (d / "data.txt").write_text("payload\\n")
    g("add", "-A")
    g("commit", "-qm", "nested")
    os.utime(d / "data.txt", (1, 1))  # its stat no longer matches: git must clean it again
print("NESTED READY")
"""

#: The clean filter: outside the sandbox it would find the harness's environment in /proc,
#: copy it out, plant a hook in the user's repository and leave a canary.
FILTER = """
import os, pathlib, sys
found = ""
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            found += open(f"/proc/{pid}/environ", "rb").read().decode("latin-1")
        except OSError:
            pass
for target, text in ((CANARY, "ran\\n"), (LEAK, found)):
    try:
        pathlib.Path(target).write_text(text)
    except OSError:
        pass
try:
    hook = pathlib.Path(HOOK)
    hook.write_text("#!/bin/sh\\ntouch /tmp/hooked\\n")
    hook.chmod(0o755)
except OSError:
    pass
sys.stdout.buffer.write(sys.stdin.buffer.read())
"""


def nested_repo_script(night: AttackNight, where: str, *, commit: bool) -> str:
    code = (
        f"CANARY = {str(night.tmp / 'filter-ran')!r}\n"
        f"LEAK = {str(night.outside / 'leak.txt')!r}\n"
        f"HOOK = {str(night.repo / '.git' / 'hooks' / 'post-checkout')!r}\n" + FILTER
    )
    return NESTED_REPO.format(where=where, commit=commit, filter_code=code)


def parked(outcome: Any) -> dict[str, Any]:
    [entry] = outcome.result["plan"]["parked"]
    return dict(entry)


def test_a_nested_repository_with_a_clean_filter_is_never_entered(night: AttackNight) -> None:
    outcome = night.play(
        [
            write("mkrepo.py", nested_repo_script(night, "vendor/lib", commit=True)),
            run("python3 mkrepo.py"),
            write("calc.py", FIXED),
        ]
    )
    assert "NESTED READY" in night.tool_results()  # the repository was made, filter and all
    assert not (night.tmp / "filter-ran").exists(), "the model's filter ran outside the sandbox"
    assert not (night.outside / "leak.txt").exists()
    assert outcome.exit_code != 4 and outcome.result["stop_reason"] != "UNRECOVERABLE_ERROR"
    entry = parked(outcome)
    assert entry["reason"].startswith("changed what judges it: `vendor/lib` is a nested git")
    assert "vendor/lib" in " ".join(entry["protected_changes"])
    assert night.branch_commits(outcome) == []
    night.assert_contained(outcome)  # no hook planted, the key nowhere
    # The parked patch holds the rest of the work, not the nested repository.
    patch = Path(entry["patch"]).read_text()
    assert "b/calc.py" in patch and "b/vendor/lib" not in patch


def test_an_empty_nested_repository_parks_the_task_and_the_night_goes_on(
    night: AttackNight,
) -> None:
    assert night.tasks is not None
    night.tasks[0]["value"] = 2
    # The next task (the user's command, in the same worktree) sees whether it is still there.
    night.tasks.append(
        {
            "id": "after",
            "title": "after",
            "command": "test -e empty || echo clean > clean.txt",
            "verify": "test -f clean.txt",
            "value": 1,
        }
    )
    outcome = night.play(
        [
            write("mkrepo.py", nested_repo_script(night, "empty", commit=False)),
            run("python3 mkrepo.py"),
            write("calc.py", FIXED),
        ]
    )
    assert "NESTED READY" in night.tool_results()
    assert outcome.exit_code != 4 and outcome.result["stop_reason"] != "UNRECOVERABLE_ERROR"
    entry = parked(outcome)
    assert entry["reason"].startswith("changed what judges it: `empty` is a nested git")
    # Thrown away with the parked task: it cannot sink the next one.
    assert [v["id"] for v in outcome.result["verified"]] == ["after"]
    assert night.branch_changed_paths(outcome) == ["clean.txt"]
    night.assert_contained(outcome)


def big_bytes() -> bytes:
    return random.Random(20240601).randbytes(2 << 20)


BIG = """
import random
open("data/big.bin", "wb").write(random.Random(20240601).randbytes(2 << 20))
"""


def test_a_file_over_max_file_mb_parks_the_task_and_never_enters_the_object_store(
    night: AttackNight,
) -> None:
    night.run = {**night.run, "max_file_mb": 1}
    outcome = night.play(
        [
            write("data/keep.txt", "small\n"),
            write("big.py", BIG),
            run("python3 big.py"),
            write("calc.py", FIXED),
        ]
    )
    entry = parked(outcome)
    assert entry["reason"].startswith("`data/big.bin` is 2.0 MiB, above [run] max_file_mb")
    sha = (
        subprocess.run(
            ["git", "hash-object", "--stdin"], input=big_bytes(), capture_output=True, check=True
        )
        .stdout.decode()
        .strip()
    )
    present = subprocess.run(["git", "-C", str(night.repo), "cat-file", "-e", sha])
    assert present.returncode != 0, "the oversized file is in the user's object store"
    assert outcome.exit_code != 4
    night.assert_contained(outcome)


LOOK = "python3 -c \"import os; print('PYCACHE', os.path.isdir('__pycache__'))\""

NO_IGNORE = {k: v for k, v in VICTIM.items() if k != ".gitignore"}


def test_bytecode_from_the_agents_test_run_neither_lands_nor_sinks_the_fix(
    tmp_path: Any,
) -> None:
    # A repository without a .gitignore, an agent that runs the tests before and after its
    # fix with bytecode writing on (as outside the sandbox), and compiles a module for good
    # measure.
    night = AttackNight(tmp_path, files=NO_IGNORE, sandbox={"bytecode": True})
    outcome = night.play(
        [
            run("python3 -m pytest -q"),
            write("calc.py", FIXED),
            run("python3 -m pytest -q"),
            run("python3 -m py_compile tidy.py"),
            run(LOOK),
        ]
    )
    assert "PYCACHE True" in night.tool_results()  # it did leave bytecode
    assert outcome.result["stop_reason"] == "GOAL_MET", outcome.result["plan"]
    assert len(night.branch_commits(outcome)) == 1
    assert night.branch_changed_paths(outcome) == ["calc.py"]
    [verified] = outcome.result["verified"]
    assert "__pycache__/" in verified["excluded"]
    night.assert_contained(outcome)


def test_sandboxed_python_writes_no_bytecode_by_default(tmp_path: Any) -> None:
    night = AttackNight(tmp_path, files=NO_IGNORE)
    outcome = night.play([run("python3 -m pytest -q"), write("calc.py", FIXED), run(LOOK)])
    assert "PYCACHE False" in night.tool_results()
    assert outcome.result["stop_reason"] == "GOAL_MET"


BUILD = """
import pathlib
lib = pathlib.Path("build/lib")
lib.mkdir(parents=True)
(lib / "calc.py").write_text(open("calc.py").read())
pathlib.Path("pkg.egg-info/PKG-INFO").write_text("Metadata-Version: 2.1\\nName: pkg\\n")
pathlib.Path("pkg.egg-info/SOURCES.txt").write_text("calc.py\\n")
pathlib.Path("dist").mkdir()
pathlib.Path("dist/pkg-1.0.tar.gz").write_bytes(b"not really")
"""

WITH_METADATA = {
    **NO_IGNORE,
    "setup.py": "from setuptools import setup\nsetup(name='pkg', py_modules=['calc'])\n",
    "pkg.egg-info/PKG-INFO": "Metadata-Version: 1.2\nName: pkg\n",
}


def test_a_build_step_lands_only_the_source_and_drops_tracked_metadata(tmp_path: Any) -> None:
    night = AttackNight(tmp_path, files=WITH_METADATA)
    outcome = night.play(
        [write("calc.py", FIXED), write("build.py", BUILD), run("python3 build.py")]
    )
    assert outcome.result["stop_reason"] == "GOAL_MET", outcome.result["plan"]
    assert sorted(night.branch_changed_paths(outcome)) == ["build.py", "calc.py"]
    [verified] = outcome.result["verified"]
    assert verified["dropped"] == ["pkg.egg-info/PKG-INFO"]
    assert {"build/", "dist/", "pkg.egg-info/SOURCES.txt"} <= set(verified["excluded"])
    name = outcome.result["branch"]["name"]
    shown = subprocess.run(
        ["git", "-C", str(night.repo), "show", f"{name}:pkg.egg-info/PKG-INFO"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown == "Metadata-Version: 1.2\nName: pkg\n"  # the base version stays
    report = night.cli("report", night.run_dir)
    assert "pkg.egg-info/PKG-INFO" in report.stdout
    night.assert_contained(outcome)


def test_the_spec_includes_and_excludes_paths(tmp_path: Any) -> None:
    night = AttackNight(tmp_path, files=dict(VICTIM))
    night.run = {**night.run, "include": ["/dist/"], "exclude": ["scratch.txt"]}
    outcome = night.play(
        [
            write("calc.py", FIXED),
            write("dist/NOTES.txt", "shipped\n"),
            write("scratch.txt", "the agent's notes\n"),
        ]
    )
    assert outcome.result["stop_reason"] == "GOAL_MET", outcome.result["plan"]
    assert sorted(night.branch_changed_paths(outcome)) == ["calc.py", "dist/NOTES.txt"]
    [verified] = outcome.result["verified"]
    assert verified["excluded"] == ["scratch.txt"]
    night.assert_contained(outcome)

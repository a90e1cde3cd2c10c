"""Files the goal's suite writes into the checkout it runs in (a test's output files) are the
suite's, not the agent's: the start check sees which files its run on a clean checkout of
the base commit wrote, and no candidate carries them (each is named as excluded). A file the
suite does not write stays the agent's change, judged as any other."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.nights import command_task, git, make_spec, run_night
from tests.helpers.project import calc_repo
from tests.helpers.suite_runs import trace_events

SUITE = "python3 -m pytest -q -p no:cacheprovider"
WRITES_OUTPUT = (
    "import pathlib\n\nfrom calc.ops import add\n\n\n"
    "def test_add_writes_its_output():\n"
    "    out = pathlib.Path(__file__).parent / 'output'\n"
    "    out.mkdir(exist_ok=True)\n"
    "    (out / 'sums.txt').write_text(str(add(2, 2)))\n"
    "    assert add(2, 2) == 4\n"
)
FIX_AND_RUN = (
    "python3 -c \"import pathlib; p = pathlib.Path('calc/ops.py'); "
    "p.write_text(p.read_text().replace('a - b', 'a + b'))\" && " + SUITE
)


def night(tmp_path: Path, command: str) -> tuple[object, list[dict]]:
    repo = calc_repo(tmp_path / "repo", {"tests/test_ops.py": WRITES_OUTPUT})
    spec = make_spec(
        repo, predicate=SUITE, tasks=[command_task("fix", command, SUITE)], model=False,
        run={"retries": 0},
    )  # fmt: skip
    _, result = run_night(spec, tmp_path / "run")
    return result, trace_events(tmp_path / "run")


def test_what_the_suite_writes_is_left_out_of_the_candidate_and_named(tmp_path: Path) -> None:
    result, events = night(tmp_path, FIX_AND_RUN)
    assert result.stop_reason == "GOAL_MET", result.plan
    (verified,) = result.verified
    assert "tests/output/sums.txt" in verified.excluded
    noted = [e for e in events if e.get("decision") == "suite_outputs"]
    assert noted and noted[0]["paths"] == ["tests/output/sums.txt"]


def test_a_file_the_suite_does_not_write_is_the_changes_own(tmp_path: Path) -> None:
    # Beside the suite's output, a file of the change's own: it is committed (and for an
    # agent's task, screened as any file under tests/), never excluded as the suite's.
    made = FIX_AND_RUN + " && echo 'def test_more(): pass' > tests/output/test_more.py"
    result, _ = night(tmp_path, made)
    assert result.stop_reason == "GOAL_MET"
    (verified,) = result.verified
    assert verified.excluded == ["tests/output/sums.txt"]
    landed = git(tmp_path / "repo", "ls-tree", "-r", "--name-only", result.branch.name)
    assert "tests/output/test_more.py" in landed.split()
    assert "tests/output/sums.txt" not in landed.split()

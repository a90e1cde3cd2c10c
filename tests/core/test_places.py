"""What a model is shown does not depend on where the run lives: the run's places are written
relative or as placeholders (``overnight.core.places``) before output is cut to a length, by
the command runner, the agent's ``run_command`` and the checks' output read back from a log."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from overnight.core.places import Places
from overnight.process import MAX_OUTPUT, placed_output, run_command
from overnight.seams import ToolContext
from overnight.tools.files import ReadFileTool
from overnight.tools.run_command import RunCommandTool
from overnight.tools.toolbox import Toolbox


def test_a_tree_reads_as_dot_and_other_places_as_their_placeholders() -> None:
    places = Places.of(
        trees=["/runs/r1/worktree", "/runs/r1/checkout/"],
        named=[("/runs/r1", "<run-dir>"), ("/home/me/proj", "<workspace>")],
    )
    text = (
        'File "/runs/r1/checkout/tests/test_a.py", line 3\n'
        "rootdir: /runs/r1/worktree\n"
        "log in /runs/r1/artifacts/x.log; repo /home/me/proj.\n"
        "others: /home/me/proj-old/a /runs/r1/worktree2 /runs/r10"
    )
    assert places(text) == (
        'File "./tests/test_a.py", line 3\n'
        "rootdir: .\n"
        "log in <run-dir>/artifacts/x.log; repo <workspace>.\n"
        "others: /home/me/proj-old/a <run-dir>/worktree2 /runs/r10"
    )
    assert Places.of(trees=["/", ""], named=[("relative/dir", "<x>")])("/a relative/dir") == (
        "/a relative/dir"
    )


_WORD = st.sampled_from(
    ["PLACE", "PLACE/src/a.py", "'PLACE'", "(PLACE/x)", "PLACE.", "PLACE:", "x", "/", "é"]
)


@given(st.lists(_WORD, max_size=30), st.sampled_from([" ", "\n", ", "]))
def test_two_places_of_any_length_read_the_same(words: list[str], space: str) -> None:
    short, long = "/r", "/home/someone/" + "d" * 180 + "/run"
    text = space.join(words)
    a = Places.of(named=[(short, "<run-dir>")])(text.replace("PLACE", short))
    b = Places.of(named=[(long, "<run-dir>")])(text.replace("PLACE", long))
    assert a == b


def _printing_its_place(where: Path, times: int) -> str:
    """A command printing the directory it runs in ``times`` times, a traceback's way."""
    return f'for i in $(seq {times}); do echo "  File \\"$PWD/src/m.py\\", line $i"; done'


def test_the_output_cut_to_its_tail_does_not_depend_on_how_long_the_path_was(
    tmp_path: Path,
) -> None:
    outputs = []
    for name in ("a", "b" * 150):
        where = tmp_path / name
        where.mkdir()
        places = Places.of(trees=[str(where)], named=[(str(tmp_path), "<run-dir>")])
        command = _printing_its_place(where, 2000)  # far over MAX_OUTPUT characters
        log = where.parent / f"{name[0]}.log"
        placed = run_command(command, cwd=where, timeout_s=60, log_path=log, place=places)
        unplaced = run_command(command, cwd=where, timeout_s=60)
        assert len(unplaced.output) == MAX_OUTPUT and str(where) in unplaced.output
        # read again from its log (as a check's output is), it reads the same as placed
        assert placed_output(unplaced, places) == places(unplaced.output)
        assert placed_output(placed, places) == placed.output
        outputs.append(placed.output.replace(log.name, "X.log"))
    assert outputs[0] == outputs[1]
    assert outputs[0].startswith("[overnight: ") and "full output in <run-dir>/X.log" in outputs[0]
    assert '  File "./src/m.py", line 2000' in outputs[0]


def test_placed_output_of_a_check_is_read_from_its_whole_log(tmp_path: Path) -> None:
    outputs = []
    for name in ("a", "b" * 150):
        where = tmp_path / name
        where.mkdir()
        log = tmp_path / "artifacts" / f"{name[0]}.log"
        result = run_command(
            _printing_its_place(where, 2000), cwd=where, timeout_s=60, log_path=log
        )
        places = Places.of(trees=[str(where)], named=[(str(tmp_path), "<run-dir>")])
        outputs.append(placed_output(result, places).replace(log.name, "X.log"))
    assert outputs[0] == outputs[1]
    assert "[overnight: " in outputs[0] and "full output in <run-dir>/artifacts/X.log" in outputs[0]


def test_run_command_shows_the_agent_the_same_output_in_any_worktree(tmp_path: Path) -> None:
    contents = []
    for name in ("w", "w" * 150):
        root = tmp_path / name / "worktree"
        (root / "src").mkdir(parents=True)
        (root / "src" / "m.py").write_text(
            "import sys\nfor i in range(400):\n"
            "    print(f'  File \"{__file__}\", line {i}: ' + 'x' * 20)\nsys.exit(1)\n"
        )
        tool = RunCommandTool(["python3 src/m.py"], max_output_chars=2000)
        ctx = ToolContext(root=root, artifacts=tmp_path / name / "artifacts", call_id="c1")
        outcome = tool.run({"command": "python3 src/m.py"}, ctx)
        assert outcome.artifact is not None  # the output was cut
        contents.append(outcome.content.replace(outcome.content.splitlines()[1], "<status>"))
    assert contents[0] == contents[1]
    assert '  File "./src/m.py", line 399: ' in contents[0]
    assert "kept in the run's artifacts as c1.log" in contents[0]
    assert str(tmp_path) not in contents[0]


def test_a_tool_error_names_the_worktree_as_the_tools_do(tmp_path: Path) -> None:
    said = []
    for name in ("r", "r" * 150):
        (tmp_path / name).mkdir()
        root = tmp_path / name / "worktree"  # not there: every file tool refuses
        ctx = ToolContext(root=root, artifacts=tmp_path / name / "artifacts", call_id="c2")
        outcome = Toolbox([ReadFileTool()]).dispatch("read_file", {"path": "a.py"}, ctx)
        assert outcome.is_error
        said.append(outcome.content)
    assert said[0] == said[1] and str(tmp_path) not in said[0]
    assert said[0].startswith("the workspace . is not available")

"""The built-in tools on real files and real subprocesses: what they do, and what they refuse
to do (with nothing outside the worktree read or touched)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from overnight.config.sandbox import SandboxSpec
from overnight.sandbox.bwrap import build_sandbox
from overnight.sandbox.policy import Counted
from overnight.seams import ToolContext, ToolError
from overnight.tools import files, search
from overnight.tools.files import EditFileTool, ReadFileTool, WriteFileTool
from overnight.tools.run_command import RunCommandTool
from overnight.tools.search import ListFilesTool, SearchTextTool
from overnight.tools.shell import parse_command
from tests.helpers.nights import make_repo
from tests.helpers.sandbox import require_bwrap

SECRET = "top secret outside the worktree\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside.txt"
    target.write_text(SECRET)
    (tmp_path / "elsewhere").mkdir()
    return target


@pytest.fixture
def ctx(tmp_path: Path, outside: Path) -> ToolContext:
    root = tmp_path / "work"
    root.mkdir()
    return ToolContext(root=root, artifacts=tmp_path / "artifacts", call_id="call-1")


def _ctx_with(base: ToolContext, **changes: object) -> ToolContext:
    fields = {
        "root": base.root,
        "artifacts": base.artifacts,
        "call_id": base.call_id,
        "seconds_left": base.seconds_left,
        "stop_requested": base.stop_requested,
        "confine": base.confine,
        **changes,
    }
    return ToolContext(**fields)  # type: ignore[arg-type]


def _refused(run: Callable[[], object], *fragments: str) -> str:
    with pytest.raises(ToolError) as err:
        run()
    message = str(err.value)
    for fragment in fragments:
        assert fragment in message
    assert SECRET.strip() not in message
    return message


# --------------------------------------------------------------------------- read_file


def test_read_file_numbers_lines(ctx: ToolContext) -> None:
    (ctx.root / "a.txt").write_text("alpha\nbeta\r\ngamma")
    out = ReadFileTool().run({"path": "a.txt"}, ctx)
    assert not out.is_error
    assert out.content == "     1\talpha\n     2\tbeta\n     3\tgamma"


def test_read_file_pages_with_offset_and_limit(ctx: ToolContext) -> None:
    (ctx.root / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    out = ReadFileTool().run({"path": "a.txt", "offset": 4, "limit": 3}, ctx)
    lines = out.content.splitlines()
    assert lines[:3] == ["     4\tline 4", "     5\tline 5", "     6\tline 6"]
    assert "lines 4-6 of 10" in lines[3]
    assert "offset=7" in lines[3]


def test_read_file_caps_long_files(ctx: ToolContext) -> None:
    (ctx.root / "big.txt").write_text("x\n" * (files.READ_MAX_LINES + 500))
    out = ReadFileTool().run({"path": "big.txt", "limit": 10**6}, ctx)
    assert out.content.count("\tx") == files.READ_MAX_LINES
    assert f"offset={files.READ_MAX_LINES + 1}" in out.content


def test_read_file_caps_characters_and_long_lines(ctx: ToolContext) -> None:
    (ctx.root / "wide.txt").write_text(("y" * 10_000 + "\n") * 100)
    out = ReadFileTool().run({"path": "wide.txt"}, ctx)
    assert len(out.content) <= files.READ_MAX_CHARS + 200
    assert "line cut: 10000 characters" in out.content
    assert "character limit" in out.content


def test_read_file_never_holds_a_long_line_whole(ctx: ToolContext) -> None:
    (ctx.root / "one.txt").write_text("z" * 3_000_000 + "\r\nsecond\nthird")
    out = ReadFileTool().run({"path": "one.txt"}, ctx)
    lines = out.content.splitlines()
    assert lines[0].endswith("[... line cut: 3000000 characters]")
    assert lines[1:] == ["     2\tsecond", "     3\tthird"]


def test_edit_file_refuses_a_file_too_big_to_hold(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "EDIT_MAX_BYTES", 1000)
    (ctx.root / "big.txt").write_text("needle\n" + "x" * 2000)
    tool = EditFileTool()
    _refused(
        lambda: tool.run({"path": "big.txt", "old": "needle", "new": "pin"}, ctx), "write_file"
    )
    assert (ctx.root / "big.txt").read_text().startswith("needle")


def test_read_file_empty_binary_directory_missing(ctx: ToolContext) -> None:
    (ctx.root / "empty.txt").write_text("")
    (ctx.root / "blob.bin").write_bytes(b"\x89PNG\x00\x01\x02")
    (ctx.root / "dir").mkdir()
    tool = ReadFileTool()
    assert "is empty" in tool.run({"path": "empty.txt"}, ctx).content
    _refused(lambda: tool.run({"path": "blob.bin"}, ctx), "binary")
    _refused(lambda: tool.run({"path": "dir"}, ctx), "directory", "list_files")
    _refused(lambda: tool.run({"path": "nope.txt"}, ctx), "does not exist")
    (ctx.root / "short.txt").write_text("one\n")
    _refused(lambda: tool.run({"path": "short.txt", "offset": 5}, ctx), "past the end")


def test_read_file_refuses_every_way_out(ctx: ToolContext, outside: Path) -> None:
    tool = ReadFileTool()
    (ctx.root / "leak.txt").symlink_to(outside)
    (ctx.root / "out").symlink_to(outside.parent, target_is_directory=True)
    _refused(lambda: tool.run({"path": "../outside.txt"}, ctx), "outside the workspace")
    _refused(lambda: tool.run({"path": str(outside)}, ctx), "outside the workspace")
    _refused(lambda: tool.run({"path": "/etc/passwd"}, ctx), "outside the workspace")
    _refused(lambda: tool.run({"path": "leak.txt"}, ctx), "symbolic link")
    _refused(lambda: tool.run({"path": "out/outside.txt"}, ctx), "symbolic link")


def test_read_file_accepts_an_absolute_path_inside(ctx: ToolContext) -> None:
    (ctx.root / "a.txt").write_text("inside\n")
    out = ReadFileTool().run({"path": str(ctx.root / "a.txt")}, ctx)
    assert out.content == "     1\tinside"


def test_read_file_refuses_git_metadata(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    ctx = ToolContext(root=repo, artifacts=tmp_path / "artifacts", call_id="c")
    _refused(lambda: ReadFileTool().run({"path": ".git/config"}, ctx), ".git")
    _refused(lambda: ReadFileTool().run({"path": ".git/HEAD"}, ctx), ".git")


# --------------------------------------------------------------------------- list_files


def test_list_files_in_a_git_repo_skips_git_and_ignored(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            ".gitignore": "build/\n*.log\n",
            "README.md": "hi\n",
            "src/pkg/mod.py": "x = 1\n",
            "src/pkg/data.json": "{}\n",
        },
    )
    (repo / "build").mkdir()
    (repo / "build" / "out.txt").write_text("generated\n")
    (repo / "run.log").write_text("noise\n")
    (repo / "new.py").write_text("untracked but not ignored\n")
    ctx = ToolContext(root=repo, artifacts=tmp_path / "artifacts", call_id="c")
    out = ListFilesTool().run({}, ctx)
    assert out.content.splitlines() == [
        ".gitignore",
        "README.md",
        "new.py",
        "src/pkg/data.json",
        "src/pkg/mod.py",
    ]


def test_list_files_starts_no_git_and_honours_nested_ignore_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listing is the harness's own walk: a program named git first on PATH (standing
    for any program the worktree could steer) never runs, and the worktree's .gitignore
    files, at every depth and with negations, still decide what is listed."""
    repo = make_repo(
        tmp_path / "repo",
        {".gitignore": "*.log\n", "pkg/.gitignore": "gen/\n!keep.log\n", "pkg/a.py": "x\n"},
    )
    (repo / "pkg" / "gen").mkdir()
    (repo / "pkg" / "gen" / "out.py").write_text("generated\n")
    (repo / "pkg" / "keep.log").write_text("kept\n")
    (repo / "pkg" / "noise.log").write_text("ignored\n")
    (repo / "nested" / ".git").mkdir(parents=True)
    (repo / "nested" / ".git" / "config").write_text("[core]\n\tfsmonitor = touch ../../ran\n")
    (repo / "nested" / "inner.py").write_text("y\n")
    spy = tmp_path / "bin"
    spy.mkdir()
    marker = tmp_path / "git-ran"
    (spy / "git").write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    (spy / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{spy}:{os.environ['PATH']}")
    ctx = ToolContext(root=repo, artifacts=tmp_path / "artifacts", call_id="c")
    listed = ListFilesTool().run({}, ctx).content.splitlines()
    assert not marker.exists(), "list_files started git over the worktree"
    assert listed == [
        ".gitignore",
        "nested/inner.py",
        "pkg/.gitignore",
        "pkg/a.py",
        "pkg/keep.log",
    ]


def test_list_files_filters_by_directory_and_glob(ctx: ToolContext) -> None:
    for rel in ("a.py", "src/b.py", "src/deep/c.py", "src/deep/d.txt", "docs/e.md"):
        (ctx.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (ctx.root / rel).write_text("x\n")
    tool = ListFilesTool()

    def names(**args: str) -> list[str]:
        return tool.run(args, ctx).content.splitlines()

    assert names(pattern="*.py") == ["a.py", "src/b.py", "src/deep/c.py"]
    assert names(path="src") == ["src/b.py", "src/deep/c.py", "src/deep/d.txt"]
    assert names(path="src", pattern="*.txt") == ["src/deep/d.txt"]
    assert names(pattern="src/*.py") == ["src/b.py"]
    assert names(pattern="src/**/*.py") == ["src/b.py", "src/deep/c.py"]
    assert names(pattern="*.{md,txt}") == ["docs/e.md", "src/deep/d.txt"]
    assert "no files" in tool.run({"pattern": "*.rs"}, ctx).content


def test_list_files_walk_skips_a_git_directory(ctx: ToolContext) -> None:
    # Not a usable repository (git refuses it), so the listing walks the tree itself.
    (ctx.root / ".git").mkdir()
    (ctx.root / ".git" / "config").write_text("broken")
    (ctx.root / "kept.txt").write_text("x\n")
    assert ListFilesTool().run({}, ctx).content == "kept.txt"


def test_list_files_says_when_it_cuts(ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "LIST_MAX_ENTRIES", 3)
    for i in range(7):
        (ctx.root / f"f{i}.txt").write_text("x\n")
    lines = ListFilesTool().run({}, ctx).content.splitlines()
    assert lines[:3] == ["f0.txt", "f1.txt", "f2.txt"]
    assert "3 of 7 files shown" in lines[3]


@pytest.mark.parametrize("in_git", [True, False], ids=["git", "walk"])
def test_the_listing_holds_a_bounded_number_of_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_git: bool
) -> None:
    monkeypatch.setattr(search, "LISTING_MAX_FILES", 5)
    root = make_repo(tmp_path / "repo") if in_git else tmp_path / "plain"
    root.mkdir(exist_ok=True)
    for i in range(12):
        (root / f"made{i:02}.txt").write_text("hit\n")
    ctx = ToolContext(root=root, artifacts=tmp_path / "artifacts", call_id="c")
    listed, cut = search.workspace_listing(root)
    assert cut and len(listed) == 5
    out = ListFilesTool().run({}, ctx).content
    assert "more than 5 files" in out.splitlines()[-1]
    found = SearchTextTool().run({"pattern": "hit"}, ctx).content
    assert len([line for line in found.splitlines() if ": hit" in line]) <= 5
    assert "more than 5 files" in found


def test_list_files_refuses_outside_and_files(ctx: ToolContext, outside: Path) -> None:
    (ctx.root / "a.txt").write_text("x\n")
    (ctx.root / "out").symlink_to(outside.parent, target_is_directory=True)
    tool = ListFilesTool()
    _refused(lambda: tool.run({"path": ".."}, ctx), "outside the workspace")
    _refused(lambda: tool.run({"path": "out"}, ctx), "symbolic link")
    _refused(lambda: tool.run({"path": "a.txt"}, ctx), "read_file")


# --------------------------------------------------------------------------- search_text


def test_search_text_reports_file_line_text(ctx: ToolContext) -> None:
    (ctx.root / "src").mkdir()
    (ctx.root / "src" / "a.py").write_text("import os\n\ndef main():\n    return os.sep\n")
    (ctx.root / "notes.md").write_text("os is here too\n")
    (ctx.root / "blob.bin").write_bytes(b"os\x00os")
    tool = SearchTextTool()
    out = tool.run({"pattern": r"\bos\b"}, ctx)
    assert out.content.splitlines() == [
        "notes.md:1: os is here too",
        "src/a.py:1: import os",
        "src/a.py:4:     return os.sep",
    ]
    only_py = tool.run({"pattern": "os", "glob": "*.py"}, ctx).content
    assert "notes.md" not in only_py
    in_dir = tool.run({"pattern": "def", "path": "src"}, ctx).content
    assert in_dir == "src/a.py:3: def main():"
    one_file = tool.run({"pattern": "os", "path": "notes.md"}, ctx).content
    assert one_file == "notes.md:1: os is here too"
    assert "no matches" in tool.run({"pattern": "zebra"}, ctx).content


def test_search_text_invalid_regex_is_a_tool_error(ctx: ToolContext) -> None:
    _refused(lambda: SearchTextTool().run({"pattern": "foo("}, ctx), "invalid regular expression")


def test_search_text_caps_matches(ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "SEARCH_MAX_MATCHES", 5)
    (ctx.root / "many.txt").write_text("hit\n" * 50)
    lines = SearchTextTool().run({"pattern": "hit"}, ctx).content.splitlines()
    assert len(lines) == 6
    assert "stopped at 5 matches" in lines[-1]


def test_search_text_does_not_follow_links_outside(ctx: ToolContext, outside: Path) -> None:
    (ctx.root / "leak.txt").symlink_to(outside)
    (ctx.root / "out").symlink_to(outside.parent, target_is_directory=True)
    out = SearchTextTool().run({"pattern": "secret"}, ctx)
    assert "top secret" not in out.content
    assert "no matches" in out.content
    _refused(lambda: SearchTextTool().run({"pattern": "secret", "path": "leak.txt"}, ctx))
    _refused(lambda: SearchTextTool().run({"pattern": "secret", "path": "../"}, ctx))


def test_search_text_refuses_what_ripgrep_refuses(ctx: ToolContext) -> None:
    (ctx.root / "a.txt").write_text("aa\n")
    tool = SearchTextTool()
    _refused(lambda: tool.run({"pattern": r"(a)\1"}, ctx), "backreferences are not supported")
    _refused(lambda: tool.run({"pattern": "(?=a)"}, ctx), "look-around")


def test_search_text_catastrophic_regex_returns(ctx: ToolContext) -> None:
    # (a+)+$ backtracks exponentially in Python's re on a run of a's followed by b; ripgrep's
    # engine is linear, so the call simply answers.
    (ctx.root / "a.txt").write_text("a" * 50_000 + "b\n" + "aaa\n")
    out = SearchTextTool().run({"pattern": "(a+)+$"}, ctx)
    assert out.content == "a.txt:2: aaa"


def test_search_text_keeps_the_pattern_one_argument(ctx: ToolContext) -> None:
    (ctx.root / "a.txt").write_text("--files\n-e x\n")
    tool = SearchTextTool()
    assert tool.run({"pattern": "--files"}, ctx).content == "a.txt:1: --files"
    assert tool.run({"pattern": "-e x"}, ctx).content == "a.txt:2: -e x"


def test_search_text_without_ripgrep_says_to_install_it(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "RIPGREP", "rg-is-not-installed-here")
    _refused(lambda: SearchTextTool().run({"pattern": "x"}, ctx), "apt-get install ripgrep")


def _hanging_rg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "bin" / "rg"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexec sleep 600\n")
    fake.chmod(0o755)
    monkeypatch.setattr(search, "RIPGREP", str(fake))


def test_search_text_ends_at_once_on_a_stop(
    ctx: ToolContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hanging_rg(tmp_path, monkeypatch)
    (ctx.root / "a.txt").write_text("x\n")
    polls = iter([None, None, None])
    stopping = _ctx_with(ctx, stop_requested=lambda: next(polls, "SIGTERM"))
    _refused(lambda: SearchTextTool().run({"pattern": "x"}, stopping), "the run is stopping")


def test_search_text_is_bounded_by_its_time_limit(
    ctx: ToolContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hanging_rg(tmp_path, monkeypatch)
    monkeypatch.setattr(search, "SEARCH_MAX_SECONDS", 0.5)
    (ctx.root / "a.txt").write_text("x\n")
    out = SearchTextTool().run({"pattern": "x"}, ctx)
    assert "search stopped after" in out.content


def test_search_text_runs_in_the_sandbox(ctx: ToolContext) -> None:
    require_bwrap()
    (ctx.root / "a.txt").write_text("needle here\n")
    sandbox = build_sandbox(SandboxSpec(), sealed=[ctx.artifacts])
    used: list[bool] = []
    counted = Counted(sandbox, lambda: used.append(True))
    boxed = _ctx_with(ctx, confine=lambda: counted)
    assert SearchTextTool().run({"pattern": "needle"}, boxed).content == "a.txt:1: needle here"
    assert used == [True]


def test_list_files_glob_with_many_stars_against_a_long_name_returns(ctx: ToolContext) -> None:
    (ctx.root / ("a" * 200)).write_text("x\n")
    out = ListFilesTool().run({"pattern": "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b"}, ctx)
    assert out.content.startswith("no files")


# --------------------------------------------------------------------------- write_file


def test_write_file_creates_parents_and_overwrites(ctx: ToolContext) -> None:
    tool = WriteFileTool()
    assert tool.mutating
    out = tool.run({"path": "pkg/sub/new.py", "content": "a = 1\nb = 2\n"}, ctx)
    assert (ctx.root / "pkg" / "sub" / "new.py").read_text() == "a = 1\nb = 2\n"
    assert out.content.startswith("created pkg/sub/new.py (2 lines")
    out = tool.run({"path": "pkg/sub/new.py", "content": "c = 3\n"}, ctx)
    assert (ctx.root / "pkg" / "sub" / "new.py").read_text() == "c = 3\n"
    assert out.content.startswith("replaced")


def test_write_file_refuses_every_way_out(ctx: ToolContext, outside: Path) -> None:
    tool = WriteFileTool()
    elsewhere = outside.parent / "elsewhere"
    (ctx.root / "leak.txt").symlink_to(outside)
    (ctx.root / "out").symlink_to(elsewhere, target_is_directory=True)
    (ctx.root / "later.txt").symlink_to(outside.parent / "created-through-link.txt")
    payload = "overwritten\n"
    _refused(lambda: tool.run({"path": "../outside.txt", "content": payload}, ctx), "outside")
    _refused(lambda: tool.run({"path": str(outside), "content": payload}, ctx), "outside")
    _refused(lambda: tool.run({"path": "leak.txt", "content": payload}, ctx), "symbolic link")
    _refused(lambda: tool.run({"path": "out/new.txt", "content": payload}, ctx), "symbolic")
    _refused(lambda: tool.run({"path": "out/a/b.txt", "content": payload}, ctx), "symbolic")
    _refused(lambda: tool.run({"path": "later.txt", "content": payload}, ctx), "symbolic")
    assert outside.read_text() == SECRET
    assert list(elsewhere.iterdir()) == []
    assert not (outside.parent / "created-through-link.txt").exists()
    assert (ctx.root / "leak.txt").is_symlink()


def test_write_file_refuses_git_metadata(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    ctx = ToolContext(root=repo, artifacts=tmp_path / "artifacts", call_id="c")
    before = (repo / ".git" / "config").read_text()
    _refused(lambda: WriteFileTool().run({"path": ".git/config", "content": "x"}, ctx), ".git")
    _refused(
        lambda: WriteFileTool().run({"path": ".git/hooks/pre-commit", "content": "x"}, ctx), ".git"
    )
    assert (repo / ".git" / "config").read_text() == before
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()


def test_write_file_refuses_a_directory(ctx: ToolContext) -> None:
    (ctx.root / "d").mkdir()
    _refused(lambda: WriteFileTool().run({"path": "d", "content": "x"}, ctx), "directory")


# --------------------------------------------------------------------------- edit_file


def test_edit_file_replaces_exactly_one_occurrence(ctx: ToolContext) -> None:
    target = ctx.root / "m.py"
    target.write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    out = EditFileTool().run({"path": "m.py", "old": "return 2", "new": "return 3"}, ctx)
    assert target.read_text() == "def f():\n    return 1\n\ndef g():\n    return 3\n"
    assert "line 5" in out.content


def test_edit_file_zero_occurrences_changes_nothing(ctx: ToolContext) -> None:
    target = ctx.root / "m.py"
    target.write_text("a = 1\n")
    tool = EditFileTool()
    _refused(lambda: tool.run({"path": "m.py", "old": "b = 1", "new": "b = 2"}, ctx), "0 occur")
    assert target.read_text() == "a = 1\n"


def test_edit_file_two_occurrences_changes_nothing(ctx: ToolContext) -> None:
    target = ctx.root / "m.py"
    target.write_text("x = 0\nx = 0\n")
    message = _refused(
        lambda: EditFileTool().run({"path": "m.py", "old": "x = 0", "new": "x = 1"}, ctx),
        "2 times",
    )
    assert "exactly once" in message
    assert target.read_text() == "x = 0\nx = 0\n"


def test_edit_file_keeps_windows_line_endings(ctx: ToolContext) -> None:
    target = ctx.root / "w.txt"
    target.write_bytes(b"one\r\ntwo\r\n")
    EditFileTool().run({"path": "w.txt", "old": "two", "new": "TWO"}, ctx)
    assert target.read_bytes() == b"one\r\nTWO\r\n"


def test_edit_file_refuses_links_outside(ctx: ToolContext, outside: Path) -> None:
    (ctx.root / "leak.txt").symlink_to(outside)
    _refused(
        lambda: EditFileTool().run({"path": "leak.txt", "old": "top", "new": "x"}, ctx),
        "symbolic link",
    )
    assert outside.read_text() == SECRET


# --------------------------------------------------------------------------- run_command


PY_ARGS = "import sys; print(sys.argv[1:])"


def test_allowlisted_command_runs_in_the_root(ctx: ToolContext) -> None:
    tool = RunCommandTool(["python"])
    out = tool.run({"command": "python -c 'import os; print(os.getcwd())'"}, ctx)
    assert not out.is_error
    assert "exit code 0" in out.content
    # the worktree reads as `.`, wherever the run lives (``overnight.core.places``)
    assert out.content.splitlines()[-1] == "."
    assert out.artifact is None
    assert not (ctx.artifacts / "call-1.log").exists()


def test_nonzero_exit_code_is_stated(ctx: ToolContext) -> None:
    out = RunCommandTool(["python"]).run(
        {"command": "python -c 'import sys; print(\"bad\"); sys.exit(3)'"}, ctx
    )
    assert "exit code 3" in out.content
    assert "bad" in out.content
    assert not out.is_error


def test_commands_off_the_allowlist_are_refused(ctx: ToolContext) -> None:
    _refused(lambda: RunCommandTool(["pytest"]).run({"command": "ls"}, ctx), "not an allowed")
    _refused(lambda: RunCommandTool([]).run({"command": "pytest"}, ctx), "not enabled")
    narrow = RunCommandTool(["python -m pytest"])
    _refused(lambda: narrow.run({"command": "python -c 'print(1)'"}, ctx), "python -m pytest")
    _refused(lambda: narrow.run({"command": "/usr/bin/python -m pytest"}, ctx), "not an allowed")


@pytest.mark.parametrize(
    "command",
    [
        "pytest; touch pwned",
        "pytest && touch pwned",
        "pytest || touch pwned",
        "pytest $(touch pwned)",
        "pytest `touch pwned`",
        "pytest | tee pwned",
        "pytest > pwned",
        "pytest < pwned",
        "pytest & touch pwned",
        "pytest\ntouch pwned",
        'pytest "$(touch pwned)"',
        'pytest "`touch pwned`"',
        "pytest $HOME",
        "python -c 'print(1)' 'unclosed",
    ],
)
def test_shell_syntax_is_refused_and_never_runs(ctx: ToolContext, command: str) -> None:
    tool = RunCommandTool(["pytest", "python"])
    _refused(lambda: tool.run({"command": command}, ctx))
    assert not (ctx.root / "pwned").exists()


def test_chained_delete_is_refused_and_nothing_is_deleted(ctx: ToolContext) -> None:
    (ctx.root / "x").mkdir()
    _refused(lambda: RunCommandTool(["pytest"]).run({"command": "pytest; rm -rf x"}, ctx), "';'")
    assert (ctx.root / "x").is_dir()


def test_quoted_metacharacters_reach_the_program_literally(ctx: ToolContext) -> None:
    out = RunCommandTool(["python"]).run(
        {"command": f"python -c '{PY_ARGS}' '$(touch pwned)' '*' 'a;b' \"c d\""}, ctx
    )
    assert "exit code 0" in out.content
    assert "['$(touch pwned)', '*', 'a;b', 'c d']" in out.content
    assert not (ctx.root / "pwned").exists()


def test_unquoted_globs_are_not_expanded(ctx: ToolContext) -> None:
    (ctx.root / "a.txt").write_text("x\n")
    out = RunCommandTool(["python"]).run({"command": f"python -c '{PY_ARGS}' *.txt"}, ctx)
    assert "['*.txt']" in out.content


@pytest.mark.parametrize("command", ["git status", "git", "/usr/bin/git log", "git-lfs ls-files"])
def test_git_is_refused_even_when_allowlisted(ctx: ToolContext, command: str) -> None:
    tool = RunCommandTool(["git", "/usr/bin/git", "git-lfs"])
    _refused(lambda: tool.run({"command": command}, ctx), "git is not available")


def test_api_keys_never_reach_the_command(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-test-0123456789")
    script = (
        "import os; print(os.environ.get('ANTHROPIC_API_KEY')); "
        "print(os.environ.get('OPENAI_API_KEY')); "
        "print(any('sk-' in v for v in os.environ.values()))"
    )
    out = RunCommandTool(["python"]).run({"command": f'python -c "{script}"'}, ctx)
    assert "exit code 0" in out.content
    assert out.content.splitlines()[-3:] == ["None", "None", "False"]
    assert "sk-ant-test" not in out.content


def test_long_output_is_cut_and_kept_whole_in_the_artifact(ctx: ToolContext) -> None:
    tool = RunCommandTool(["python"], max_output_chars=1000)
    script = "print('FIRST'); [print(f'line {i:05d}') for i in range(20000)]; print('LAST')"
    out = tool.run({"command": f'python -c "{script}"'}, ctx)
    assert "exit code 0" in out.content
    assert len(out.content) < 1000 + 400
    assert "FIRST" in out.content
    assert "LAST" in out.content
    assert out.artifact is not None
    # named by its name in the run's artifacts, not by a path that depends on where they are
    assert f"kept in the run's artifacts as {Path(out.artifact).name}" in out.content
    assert str(ctx.artifacts) not in out.content
    full = Path(out.artifact).read_text()
    assert Path(out.artifact).parent == ctx.artifacts
    assert full.count("line ") == 20000
    assert full.startswith("FIRST\n")
    assert full.endswith("LAST\n")


def test_timeout_is_reported_and_the_command_killed(ctx: ToolContext) -> None:
    tool = RunCommandTool(["python"], timeout_s=60)
    started = time.monotonic()
    out = tool.run({"command": "python -c 'import time; time.sleep(30)'", "timeout_s": 0.5}, ctx)
    assert time.monotonic() - started < 10
    assert out.is_error
    assert "timed out after 0.5 s" in out.content
    assert "exit code: none" in out.content


def test_timeout_never_outlasts_the_run(ctx: ToolContext) -> None:
    short = _ctx_with(ctx, seconds_left=lambda: 0.5)
    out = RunCommandTool(["python"], timeout_s=60).run(
        {"command": "python -c 'import time; time.sleep(30)'"}, short
    )
    assert "timed out after 0.5 s" in out.content
    none_left = _ctx_with(ctx, seconds_left=lambda: 0.0)
    _refused(lambda: RunCommandTool(["python"]).run({"command": "python -V"}, none_left), "time")


def test_no_command_starts_once_the_run_is_stopping(ctx: ToolContext) -> None:
    stopping = _ctx_with(ctx, stop_requested=lambda: "SIGTERM")
    _refused(
        lambda: RunCommandTool(["python"]).run(
            {"command": 'python -c \'open("pwned", "w")\''}, stopping
        ),
        "SIGTERM",
    )
    assert not (ctx.root / "pwned").exists()


def test_parse_command_splits_like_a_shell() -> None:
    assert parse_command("pytest -q 'tests/a b.py' \"-k x\" c\\ d") == [
        "pytest",
        "-q",
        "tests/a b.py",
        "-k x",
        "c d",
    ]
    assert parse_command("python -c 'a; b | c'") == ["python", "-c", "a; b | c"]
    with pytest.raises(ToolError, match="empty"):
        parse_command("   ")


def test_a_stop_request_ends_a_running_command(ctx: ToolContext) -> None:
    started = time.monotonic()

    def stop_after_a_moment() -> str | None:
        return "SIGTERM" if time.monotonic() - started > 0.3 else None

    stopping = _ctx_with(ctx, stop_requested=stop_after_a_moment)
    out = RunCommandTool(["python"], timeout_s=60).run(
        {"command": "python -c 'import time; time.sleep(30)'"}, stopping
    )
    assert time.monotonic() - started < 10
    assert out.is_error
    assert "exit code: none; stopped because the run is ending" in out.content

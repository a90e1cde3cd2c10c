"""resolve_inside against real directories and real symbolic links."""

from __future__ import annotations

from pathlib import Path

import pytest

from overnight.seams import ToolError
from overnight.tools.paths import display, resolve_inside


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (tmp_path / "outside.txt").write_text("secret\n")
    (tmp_path / "elsewhere").mkdir()
    return root


def test_relative_paths_resolve_inside(root: Path) -> None:
    real = root.resolve()
    assert resolve_inside(root, "src/app.py") == real / "src" / "app.py"
    assert resolve_inside(root, "src/../src/app.py") == real / "src" / "app.py"
    assert resolve_inside(root, "new/dir/file.txt") == real / "new" / "dir" / "file.txt"
    assert resolve_inside(root, ".") == real
    assert resolve_inside(root, "") == real


def test_dot_dot_escape_is_refused(root: Path) -> None:
    with pytest.raises(ToolError) as err:
        resolve_inside(root, "../outside.txt")
    assert "outside the workspace" in str(err.value)
    assert "relative to the repository root" in str(err.value)
    with pytest.raises(ToolError):
        resolve_inside(root, "src/../../outside.txt")


def test_absolute_path_outside_is_refused(root: Path) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        resolve_inside(root, "/etc/passwd")


def test_absolute_path_inside_the_root_is_accepted(root: Path) -> None:
    target = root / "src" / "app.py"
    assert resolve_inside(root, str(target.resolve())) == target.resolve()
    assert resolve_inside(root, str(target.absolute())) == target.resolve()


def test_root_given_through_a_symlink_still_confines(root: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(root, target_is_directory=True)
    assert resolve_inside(alias, "src/app.py") == root.resolve() / "src" / "app.py"
    assert resolve_inside(alias, str(alias / "src" / "app.py")) == root.resolve() / "src/app.py"
    with pytest.raises(ToolError):
        resolve_inside(alias, "../outside.txt")


def test_symlink_to_a_file_outside_is_refused(root: Path, tmp_path: Path) -> None:
    (root / "leak.txt").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(ToolError) as err:
        resolve_inside(root, "leak.txt")
    assert "symbolic link" in str(err.value)


def test_symlinked_directory_pointing_outside_is_refused(root: Path, tmp_path: Path) -> None:
    (root / "out").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    for path in ("out", "out/new.txt", "out/deeper/new.txt"):
        with pytest.raises(ToolError, match="symbolic link"):
            resolve_inside(root, path)


def test_dangling_symlink_pointing_outside_is_refused(root: Path, tmp_path: Path) -> None:
    (root / "later.txt").symlink_to(tmp_path / "not-yet.txt")
    with pytest.raises(ToolError, match="symbolic link"):
        resolve_inside(root, "later.txt")


def test_symlink_staying_inside_resolves_to_its_target(root: Path) -> None:
    (root / "alias.py").symlink_to(root / "src" / "app.py")
    (root / "code").symlink_to(root / "src", target_is_directory=True)
    assert resolve_inside(root, "alias.py") == (root / "src" / "app.py").resolve()
    assert resolve_inside(root, "code/app.py") == (root / "src" / "app.py").resolve()


def test_symlink_loop_is_a_tool_error(root: Path) -> None:
    (root / "a").symlink_to(root / "b")
    (root / "b").symlink_to(root / "a")
    with pytest.raises(ToolError):
        resolve_inside(root, "a")


@pytest.mark.parametrize(
    "path", [".git", ".git/config", "./.git/HEAD", "src/../.git/config", ".GIT/config", "x/.git"]
)
def test_git_metadata_is_refused(root: Path, path: str) -> None:
    with pytest.raises(ToolError) as err:
        resolve_inside(root, path)
    assert ".git" in str(err.value)


def test_symlink_to_git_metadata_is_refused(root: Path) -> None:
    (root / "meta").symlink_to(root / ".git", target_is_directory=True)
    with pytest.raises(ToolError, match=r"\.git"):
        resolve_inside(root, "meta/config")


def test_names_that_only_start_with_git_are_fine(root: Path) -> None:
    assert resolve_inside(root, ".gitignore").name == ".gitignore"
    assert resolve_inside(root, ".github/workflows/ci.yml").name == "ci.yml"


def test_nul_character_is_refused(root: Path) -> None:
    with pytest.raises(ToolError, match="NUL"):
        resolve_inside(root, "src/app.py\x00.txt")


def test_missing_root_is_a_tool_error(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="not available"):
        resolve_inside(tmp_path / "gone", "x")


def test_display_is_relative_with_slashes(root: Path) -> None:
    assert display(root, resolve_inside(root, "src/app.py")) == "src/app.py"
    assert display(root, resolve_inside(root, ".")) == "."

"""Confining a path the model gave to the worktree.

Rules (``resolve_inside``):

* A relative path is taken relative to the worktree root. ``a/../b`` is fine as long as it
  stays inside; ``../x`` is refused.
* An absolute path is accepted only when it names something inside the worktree (the model
  often echoes back absolute paths from tracebacks); any other absolute path is refused.
* Symbolic links are resolved, and the *real* target must be inside the *real* root. A link
  inside the worktree that points outside is refused, whether it is the file itself or one of
  its parent directories, for reading and for writing alike; so is a dangling link whose
  target would be outside.
* Nothing named ``.git`` (compared case-insensitively, at any depth) may be touched: the
  repository's history belongs to overnight, which commits and reverts on its own.

Once resolved, the path contains no symbolic link at all, so the tools open exactly what was
checked. Only the tools themselves change the worktree between the check and the use (a
command the agent runs is over, process group and all, before the next tool call starts).
"""

from __future__ import annotations

import os
from pathlib import Path

from overnight.core.places import ARTIFACTS, Places
from overnight.seams import ToolContext, ToolError

GIT_DIR = ".git"


def real_root(root: Path) -> Path:
    """The worktree root with every symbolic link resolved; a ToolError if it is missing."""
    try:
        resolved = root.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise ToolError(f"the workspace {root} is not available: {exc}") from None
    if not resolved.is_dir():
        raise ToolError(f"the workspace {root} is not a directory")
    return resolved


def resolve_inside(root: Path, user_path: str) -> Path:
    """The real, absolute path that ``user_path`` names inside ``root``.

    Raises ``ToolError`` with a message the model can act on when the path is empty,
    outside the worktree (directly, or through a symbolic link), or inside ``.git``.
    An empty path or ``.`` names the root itself.
    """
    if "\x00" in user_path:
        raise ToolError("the path contains a NUL character; give a plain relative path")
    top = real_root(root)
    shown = user_path or "."
    candidate = Path(user_path)
    if not candidate.is_absolute():
        candidate = top / candidate

    lexical = Path(os.path.normpath(candidate))
    given_root = Path(os.path.normpath(root.absolute()))
    if not (_within(lexical, top) or _within(lexical, given_root)):
        raise ToolError(
            f"path {shown} is outside the workspace; use a path relative to the repository root"
        )
    if _names_git(lexical.parts):
        raise ToolError(_git_message(shown))

    try:
        resolved = candidate.resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Python 3.11)
        raise ToolError(f"path {shown} cannot be resolved: {exc}") from None
    if not _within(resolved, top):
        raise ToolError(
            f"path {shown} is or goes through a symbolic link that points outside the "
            "workspace; tools only follow links that stay inside the repository, so use the "
            "path of a file inside it"
        )
    if _names_git(resolved.relative_to(top).parts):
        raise ToolError(_git_message(shown))
    return resolved


def tool_places(ctx: ToolContext) -> Places:
    """How a tool's output and errors write where the run lives (``overnight.core.places``):
    the worktree as ``.`` (a traceback's ``/…/worktree/src/a.py`` reads ``./src/a.py``, a
    path the tools take), the run's artifacts as ``<artifacts>``."""
    return Places.of(
        trees=[str(ctx.root.absolute()), os.path.realpath(ctx.root)],
        named=[
            (str(ctx.artifacts.absolute()), ARTIFACTS),
            (os.path.realpath(ctx.artifacts), ARTIFACTS),
        ],
    )


def display(root: Path, path: Path) -> str:
    """``path`` (real, inside the root) as the model should write it: relative, with ``/``."""
    try:
        rel = path.relative_to(real_root(root))
    except ValueError:
        return str(path)
    text = rel.as_posix()
    return "." if text in ("", ".") else text


def is_git_name(name: str) -> bool:
    """Whether one path component is the repository's metadata (``.git``, any case)."""
    return name.casefold() == GIT_DIR


def _names_git(parts: tuple[str, ...]) -> bool:
    return any(is_git_name(part) for part in parts)


def _git_message(shown: str) -> str:
    return (
        f"path {shown} is inside .git, which overnight manages (it commits and reverts your "
        "work itself); leave version control alone and work on the files of the repository"
    )


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents

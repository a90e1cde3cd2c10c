"""What a task's candidate is made of: the rules the harness applies to the worktree.

A candidate is the change the agent meant, nothing generated. From the worktree the harness
takes every tracked file and every untracked file that no rule excludes:

* the generated-files rules (``BUILTIN_EXCLUDES`` plus ``[run] exclude``, gitignore syntax)
  exclude caches and build products whatever the repository's own rules say; a *tracked*
  file they match keeps its base version (its change is *dropped*, with a note);
* the repository's ``.gitignore`` files and ``info/exclude`` exclude untracked files as git
  would (evaluated by :mod:`overnight.core.ignore`, never by git);
* ``[run] include`` (same syntax) re-admits a path either of the above would exclude;
* the files the goal's suite itself writes (``outputs``: what its run on a clean checkout of
  the base commit left there, a test's output files, a coverage database) are excluded as
  generated: the agent's own test runs write them too, and a run on any clean checkout
  writes them again.

Refused outright (the task is parked, the path left out): a ``.git`` anywhere below the top
(a nested repository or a gitlink), and a file above ``[run] max_file_mb``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from overnight.core.automation import AUTOMATION_REASON, NAMED_IN_REASON, AutomationChange
from overnight.core.ignore import Rule, decide, parse_rules

#: Caches and build products that never enter a candidate (gitignore syntax). ``build/`` and
#: ``dist/`` are anchored at the top: a package may well have a ``build`` subpackage.
BUILTIN_EXCLUDES: tuple[str, ...] = (
    "__pycache__/",
    "*.py[cod]",
    "*$py.class",
    "*.so",
    "*.pyd",
    ".pytest_cache/",
    ".mypy_cache/",
    ".ruff_cache/",
    ".hypothesis/",
    ".coverage",
    ".coverage.*",
    "htmlcov/",
    ".tox/",
    ".nox/",
    ".venv/",
    "/build/",
    "/dist/",
    "*.egg-info/",
    "/.eggs/",
    "/pip-wheel-metadata/",
    "node_modules/",
)

#: Most entries named in a task's ``excluded`` or ``dropped`` note.
MAX_NOTED = 100

MIB = 1 << 20


@dataclass(frozen=True)
class Refusal:
    """A path that may not be in a candidate, and why (one whole sentence naming it)."""

    path: str
    reason: str
    judges: bool
    """A change to what judges the work (a nested repository), as opposed to a limit."""


@dataclass
class Notes:
    """What the harness left out of a candidate, so that nothing disappears silently."""

    excluded: list[str] = field(default_factory=list)
    """Untracked paths the generated-files rules kept out (a directory ends with ``/``)."""
    dropped: list[str] = field(default_factory=list)
    """Tracked generated files whose change was dropped (the base version stays)."""
    refused: list[Refusal] = field(default_factory=list)
    more_excluded: int = 0
    more_dropped: int = 0

    def exclude(self, path: str) -> None:
        if len(self.excluded) < MAX_NOTED:
            self.excluded.append(path)
        else:
            self.more_excluded += 1

    def drop(self, path: str) -> None:
        if len(self.dropped) < MAX_NOTED:
            self.dropped.append(path)
        else:
            self.more_dropped += 1

    def listed_excluded(self) -> list[str]:
        extra = [f"... and {self.more_excluded} more"] if self.more_excluded else []
        return [*self.excluded, *extra]

    def listed_dropped(self) -> list[str]:
        extra = [f"... and {self.more_dropped} more"] if self.more_dropped else []
        return [*self.dropped, *extra]


@dataclass
class CandidateRules:
    """The generated-files rules and the size limit of one night."""

    exclude: tuple[str, ...] = BUILTIN_EXCLUDES
    include: tuple[str, ...] = ()
    max_file_bytes: int = 10 * MIB
    outputs: frozenset[str] = frozenset()
    """Files the goal's suite writes in a clean checkout of the base commit."""
    _exclude: list[Rule] = field(default_factory=list, repr=False)
    _include: list[Rule] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self._exclude = parse_rules(self.exclude)
        self._include = parse_rules(self.include)

    @property
    def has_includes(self) -> bool:
        return bool(self._include)

    def generated(self, path: str, is_dir: bool) -> bool:
        """Whether the generated-files rules exclude ``path`` itself (not counting a parent
        directory, which the walk does not enter)."""
        if not is_dir and path in self.outputs:
            return True
        rule = decide(self._exclude, path, is_dir)
        return rule is not None and not rule.negated

    def generated_anywhere(self, path: str) -> bool:
        """Whether the generated-files rules exclude the file ``path`` or a directory above
        it (and ``[run] include`` does not admit it)."""
        if self.included(path, False):
            return False
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            if self.generated("/".join(parts[:depth]), depth < len(parts)):
                return True
        return False

    def may_include_under(self, directory: str) -> bool:
        """Whether an ``include`` rule could admit something below ``directory`` (so the walk
        must enter it although other rules exclude it)."""
        for rule in self._include:
            if rule.negated:
                continue
            if not rule.anchored:
                return True
            lead = rule.text.strip().lstrip("/")
            for i, c in enumerate(lead):
                if c in "*?[\\":
                    lead = lead[:i]
                    break
            mine = directory + "/"
            if lead.startswith(mine) or mine.startswith(lead):
                return True
        return False

    def included(self, path: str, is_dir: bool) -> bool:
        """Whether ``[run] include`` admits ``path`` (or a directory above it)."""
        if not self._include:
            return False
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            rule = decide(self._include, prefix, is_dir or depth < len(parts))
            if rule is not None and not rule.negated:
                return True
        return False


def rules_for(
    exclude: Sequence[str],
    include: Sequence[str],
    max_file_mb: float,
    outputs: Sequence[str] = (),
) -> CandidateRules:
    """The night's rules: the built-in excludes, then the spec's ``exclude``, ``include``,
    and the files the goal's suite writes (``outputs``)."""
    return CandidateRules(
        exclude=(*BUILTIN_EXCLUDES, *exclude),
        include=tuple(include),
        max_file_bytes=int(max_file_mb * MIB),
        outputs=frozenset(outputs),
    )


def is_git_name(name: str) -> bool:
    """Whether a file name is one git treats as its own directory (``.git`` and the spellings
    other file systems fold onto it), which no candidate may hold."""
    folded = name.lower().rstrip(" .")
    return folded == ".git" or folded.startswith("git~")


def nested_repository(directory: str, entry: str) -> Refusal:
    where = directory or "."
    return Refusal(
        path=directory,
        reason=(
            f"`{where}` is a nested git repository (`{entry}`): git would record it as a "
            "submodule and its own config could run programs, so it was left out of the "
            "candidate"
        ),
        judges=True,
    )


def too_large(path: str, size: int, limit: int) -> Refusal:
    return Refusal(
        path=path,
        reason=(
            f"`{path}` is {size / MIB:.1f} MiB, above [run] max_file_mb "
            f"({limit / MIB:g} MiB): it was left out of the candidate and never stored in "
            "the repository"
        ),
        judges=False,
    )


def unreadable_rules(path: str, why: str) -> Refusal:
    return Refusal(
        path=path,
        reason=(
            f"`{path}` holds ignore rules beyond what the harness evaluates ({why}), so the "
            "candidate could not be decided"
        ),
        judges=False,
    )


def refused_by_git(why: str) -> Refusal:
    return Refusal(
        path="",
        reason=f"git refused a path of the candidate: {why}",
        judges=True,
    )


def park_reason(
    refused: Sequence[Refusal],
    violations: Sequence[str],
    automation: Sequence[AutomationChange] = (),
) -> tuple[str, list[str]]:
    """The park reason (its first sentence whole, naming the path and the rule) and every
    line behind it, for a candidate with refusals, changes to what judges the work, or
    changes to what runs by itself. What judges the work comes first: it is the verdict that
    could not be trusted."""
    lines = [r.reason for r in refused] + list(violations) + [a.sentence() for a in automation]
    judged = [r.reason for r in refused if r.judges] + list(violations)
    if judged:
        head, others = f"changed what judges it: {judged[0]}", len(lines) - 1
    elif automation:
        named = [f"`{a.path}`" for a in automation[:NAMED_IN_REASON]]
        head = f"{AUTOMATION_REASON}: {', '.join(named)}"
        others = len(lines) - len(named)
    else:
        head, others = lines[0], len(lines) - 1
    if others:
        head += f" (and {others} more)"
    return head, lines

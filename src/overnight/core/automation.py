"""What runs by itself: the automation paths a candidate may not change unless the spec names
them (``[predicate] allow_automation``).

An automation path is a file that makes code run on an event rather than by a person's
command: CI on a push, a git filter on checkout, direnv on ``cd``, an editor's task on opening
the folder, a commit hook, an install script, a coding agent's hook or tool server, or the
standing instructions a coding agent reads by itself on start (``AGENTS.md``, ``CLAUDE.md``,
``.cursorrules``), which steer what the next agent runs unattended. Changing one (creating,
editing, deleting, or renaming into or out of it) parks an agent task with its patch, like a
change to what judges the work; an allowed change lands and is reported.

Every rule matches at any depth: a nested ``.gitattributes`` or ``.envrc`` is read there by
its tool, and a nested ``.github/workflows`` is not read by GitHub but is one move away from
being read, so it is not worth telling apart. Names are compared as a case-insensitive file
system would store them: case folded (``.GitHub/Workflows``), trailing dots and spaces dropped
(``.envrc.``), the code points HFS+ ignores removed; a Windows short name (``GITHUB~1``) could
stand for any of them, so one counts too.

A symbolic link counts by its own path, by where it could stand for a directory that holds an
automation path (``.github`` pointing elsewhere), and by its target (``ci.yml`` pointing into
``.github/workflows``); a file counts when an automation link of the branch, or of the
candidate, resolves to it or through it. Link targets are strings split on ``/`` and compared,
never followed on disk.

``package.json`` counts whatever part of it changed: telling a change of its ``scripts`` from
a dependency bump would need its JSON parsed, and the harness parses no model-written bytes
outside the sandbox; a dependency change runs new code on install as well (a ``file:`` or git
dependency's own scripts).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from overnight.core.globs import Glob, compile_glob, path_matcher
from overnight.core.protect import ChangedPath

#: The park reason's first words.
AUTOMATION_REASON = "changes what runs by itself on your machine or CI"

#: Paths named in the park reason itself (the detail names every one).
NAMED_IN_REASON = 5

_CI = "a CI pipeline"
_GIT = "git configuration that runs programs"
_HOOK = "a commit hook"
_SHELL = "shell configuration loaded on entering the directory"
_EDITOR = "editor configuration that can run tasks on opening the folder"
_INSTALL = "package manager configuration that runs programs on install"
_AGENT = "coding agent configuration that starts programs (hooks, tool servers)"
_INSTRUCTIONS = "standing instructions a coding agent reads on start"

#: The automation paths: ``dir/**`` is everything below that directory, anything else a file
#: name (a glob). Lower case; matched at any depth against folded names.
AUTOMATION_PATHS: tuple[tuple[str, str], ...] = (
    # CI
    (".github/workflows/**", "a GitHub Actions workflow"),
    (".github/actions/**", "a GitHub Actions action"),
    ("action.{yml,yaml}", "a GitHub Actions action definition"),
    (".gitea/workflows/**", _CI),
    (".forgejo/workflows/**", _CI),
    (".gitlab-ci.{yml,yaml}", _CI),
    (".gitlab/ci/**", _CI),
    (".circleci/**", _CI),
    ("azure-pipelines.{yml,yaml}", _CI),
    (".azure-pipelines/**", _CI),
    (".buildkite/**", _CI),
    ("jenkinsfile*", _CI),
    (".travis.{yml,yaml}", _CI),
    ("bitbucket-pipelines.{yml,yaml}", _CI),
    (".drone.{yml,yaml,star,jsonnet}", _CI),
    (".woodpecker.{yml,yaml}", _CI),
    (".woodpecker/**", _CI),
    ("{,.}appveyor.{yml,yaml}", _CI),
    (".cirrus.{yml,yaml,star}", _CI),
    # git
    (".gitattributes", "git attributes (a filter or diff driver runs a program)"),
    (".gitmodules", "git submodule configuration"),
    (".lfsconfig", _GIT),
    (".githooks/**", "a git hook"),
    (".git/**", "git's own directory (its hooks and config run programs)"),
    # the shell and editors
    (".envrc", _SHELL),
    (".env", "environment settings tools load by themselves"),
    (".env.*", "environment settings tools load by themselves"),
    ("{,.}mise.toml", _SHELL),
    ("{,.}mise.*.toml", _SHELL),
    (".mise/**", _SHELL),
    (".vscode/**", _EDITOR),
    ("*.code-workspace", _EDITOR),
    (".idea/**", _EDITOR),
    (".zed/**", _EDITOR),
    (".devcontainer/**", "a dev container definition (its commands run on opening it)"),
    (".devcontainer.json", "a dev container definition (its commands run on opening it)"),
    ("{.exrc,.nvimrc,.nvim.lua}", _EDITOR),
    (".dir-locals{,-2}.el", _EDITOR),
    # commit hooks
    (".pre-commit-config.{yaml,yml}", _HOOK),
    (".husky/**", _HOOK),
    ("{,.}lefthook{,-local}.{yml,yaml,toml,json}", _HOOK),
    (".lefthook/**", _HOOK),
    (".lintstagedrc*", _HOOK),
    ("lint-staged.config.*", _HOOK),
    (".overcommit.yml", _HOOK),
    ("{,.}simple-git-hooks*", _HOOK),
    # package managers
    ("package.json", "an npm manifest (its scripts and dependencies run on install)"),
    ("binding.gyp", _INSTALL),
    (".npmrc", _INSTALL),
    (".yarnrc{,.yml}", _INSTALL),
    (".yarn/plugins/**", _INSTALL),
    (".yarn/releases/**", _INSTALL),
    (".pnpmfile.*", _INSTALL),
    ("bunfig.toml", _INSTALL),
    # coding agents
    (".claude/**", _AGENT),
    (".mcp.json", _AGENT),
    (".cursor/**", _AGENT),
    (".codex/**", _AGENT),
    (".gemini/**", _AGENT),
    (".continue/**", _AGENT),
    (".windsurf/**", _AGENT),
    (".roo/**", _AGENT),
    (".opencode/**", _AGENT),
    ("opencode.{json,jsonc}", _AGENT),
    (".aider.conf.{yml,yaml}", _AGENT),
    # coding agents' standing instructions (a file name here counts in any directory:
    # ``copilot-instructions.md`` is read from ``.github``)
    ("{claude,claude.local}.md", _INSTRUCTIONS),
    ("{agents,agents.override,agent}.md", _INSTRUCTIONS),
    ("{gemini,qwen}.md", _INSTRUCTIONS),
    ("{crush,crush.local}.md", _INSTRUCTIONS),
    ("copilot-instructions.md", _INSTRUCTIONS),
    (".github/instructions/**", _INSTRUCTIONS),
    (".github/prompts/**", _INSTRUCTIONS),
    (".github/chatmodes/**", _INSTRUCTIONS),
    (".github/agents/**", _INSTRUCTIONS),
    (".cursorrules", _INSTRUCTIONS),
    (".windsurfrules", _INSTRUCTIONS),
    (".clinerules{,-*}", _INSTRUCTIONS),
    (".clinerules/**", _INSTRUCTIONS),
    (".roorules{,-*}", _INSTRUCTIONS),
    (".kilocoderules", _INSTRUCTIONS),
    (".kilocode/**", _INSTRUCTIONS),
    (".kiro/**", _INSTRUCTIONS),
    (".junie/**", _INSTRUCTIONS),
    (".amazonq/rules/**", _INSTRUCTIONS),
    (".augment-guidelines", _INSTRUCTIONS),
    (".augment/**", _INSTRUCTIONS),
    (".rules", _INSTRUCTIONS),
    (".goosehints", _INSTRUCTIONS),
    (".trae/**", _INSTRUCTIONS),
    (".qoder/**", _INSTRUCTIONS),
)

SHORT_NAME = "a Windows short name, which can stand for any name of its directory"

#: Code points HFS+ leaves out of a name when it compares two.
_IGNORED = dict.fromkeys(
    [*range(0x200C, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
)

#: Most links followed to resolve one path (as the kernel's limit).
MAX_HOPS = 40

#: Longest path resolved (the kernel's ``PATH_MAX``); a longer one cannot be opened.
MAX_PATH = 4096

#: Most path components walked to resolve every link of one candidate.
MAX_STEPS = 200_000

How = Literal[
    "path", "directory link", "link target", "through link", "unreadable link", "costly link"
]


def fold(name: str) -> str:
    """One path component as a case-insensitive file system would store it."""
    return name.translate(_IGNORED).upper().lower().rstrip(" .")


def _short_name(name: str) -> bool:
    """Whether a folded component has the shape of a Windows 8.3 short name (``github~1``)."""
    stem, tilde, rest = name.partition("~")
    digits, _dot, ext = rest.partition(".")
    return (
        bool(tilde)
        and 1 <= len(stem) <= 6
        and "." not in stem
        and bool(digits)
        and all(ch in "0123456789" for ch in digits)
        and len(stem) + 1 + len(digits) <= 8
        and len(ext) <= 3
        and "." not in ext
        and "~" not in ext
    )


@dataclass(frozen=True)
class _Rules:
    dirs: tuple[tuple[tuple[str, ...], str], ...]
    names: tuple[tuple[Glob, str], ...]
    by_first: dict[str, tuple[tuple[tuple[str, ...], str], ...]]
    """The directory rules by their first component."""


def _rules() -> _Rules:
    dirs: list[tuple[tuple[str, ...], str]] = []
    names: list[tuple[Glob, str]] = []
    for pattern, what in AUTOMATION_PATHS:
        if pattern.endswith("/**"):
            dirs.append((tuple(pattern[: -len("/**")].split("/")), what))
        else:
            names.append((compile_glob(pattern), what))
    by_first: dict[str, tuple[tuple[tuple[str, ...], str], ...]] = {}
    for rule in dirs:
        by_first[rule[0][0]] = (*by_first.get(rule[0][0], ()), rule)
    return _Rules(tuple(dirs), tuple(names), by_first)


_RULES = _rules()


def _directory_rule(parts: Sequence[str]) -> str | None:
    """The rule of the first directory run ``parts`` holds, or None."""
    for i, part in enumerate(parts):
        for run, what in _RULES.by_first.get(part, ()):
            if tuple(parts[i : i + len(run)]) == run:
                return what
    return None


def _components(path: str) -> list[str]:
    return [fold(p) for p in path.split("/") if p not in ("", ".", "..")]


def file_rule(path: str) -> str | None:
    """What makes the file at ``path`` an automation path, or None."""
    parts = _components(path)
    if not parts:
        return None
    for glob, what in _RULES.names:
        if glob.match(parts[-1]):
            return what
    found = _directory_rule(parts[:-1])
    if found is not None:
        return found
    if any(_short_name(p) for p in parts):
        return SHORT_NAME
    return None


def link_rule(path: str) -> tuple[str, bool] | None:
    """What makes a symbolic link at ``path`` (which may stand for a directory) reach an
    automation path, and whether it does so as a directory; None when it does not."""
    found = file_rule(path)
    if found is not None:
        return found, False
    parts = _components(path)
    found = _directory_rule(parts)
    if found is not None:
        return found, True
    for run, what in _RULES.dirs:
        if any(tuple(parts[-j:]) == run[:j] for j in range(1, len(run)) if j <= len(parts)):
            return what, True
    return None


class TooCostly(Exception):
    """Resolving the links of one candidate took more steps than ``MAX_STEPS``."""


@dataclass
class Steps:
    """The steps left to resolve the links of one candidate: a tree of many long, chained
    links is refused rather than walked for as long as it makes the harness walk."""

    left: int = MAX_STEPS

    def take(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise TooCostly


def resolve(
    link: str, links: Mapping[str, str], steps: Steps | None = None
) -> tuple[str | None, list[str]]:
    """Where the link at ``link`` leads inside the repository once every link of ``links`` on
    the way is followed (None when it leaves it, loops, or grows longer than a path may be),
    and the links passed through. Raises ``TooCostly`` when ``steps`` run out."""
    steps = steps or Steps()
    visited = [link]
    parent = link.rsplit("/", 1)[0] if "/" in link else ""
    target = links[link]
    if target.startswith("/"):
        return None, visited
    pending = deque([*parent.split("/"), *target.split("/")])
    walked: list[str] = []  # the path so far, each prefix whole (no join per step)
    while pending:
        steps.take()
        part = pending.popleft()
        if part in ("", "."):
            continue
        if part == "..":
            if not walked:
                return None, visited
            walked.pop()
            continue
        here = f"{walked[-1]}/{part}" if walked else part
        if len(here) > MAX_PATH:
            return None, visited
        walked.append(here)
        if here in links:
            if len(visited) > MAX_HOPS:
                return None, visited
            visited.append(here)
            nxt = links[here]
            if nxt.startswith("/"):
                return None, visited
            walked.pop()
            pending.extendleft(reversed(nxt.split("/")))
    return (walked[-1] if walked else ""), visited


def _target_path(link: str, target: str) -> str:
    """A link's target as a path to match: relative to the link's directory, ``..`` that
    climbs out of the repository and a leading ``/`` left out (conservative for matching)."""
    parent = link.rsplit("/", 1)[0] if "/" in link else ""
    parts: list[str] = []
    for part in [*(parent.split("/") if not target.startswith("/") else []), *target.split("/")]:
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)


@dataclass(frozen=True)
class AutomationChange:
    """One changed path of a candidate that changes what runs by itself."""

    path: str
    status: str
    what: str
    reaches: str
    """The automation path it changes: ``path`` itself, a link's target, or the link through
    which it is reached. ``allow_automation`` is matched against it."""
    how: How = "path"

    def sentence(self) -> str:
        where = f"`{self.path}`"
        verb = {"A": "created", "D": "deleted", "T": "type changed"}.get(self.status, "changed")
        if self.how == "directory link":
            return (
                f"{where} is a symbolic link in place of a directory that holds {self.what} "
                f"({verb})"
            )
        if self.how == "link target":
            return f"{where} is a symbolic link to `{self.reaches}`, {self.what} ({verb})"
        if self.how == "through link":
            return (
                f"{where} is reached through the symbolic link `{self.reaches}`, {self.what} "
                f"({verb})"
            )
        if self.how == "unreadable link":
            return f"{where} is a symbolic link whose target could not be read ({verb})"
        if self.how == "costly link":
            return (
                f"{where} could not be judged: the symbolic links of the tree are too many, "
                f"too long or too deeply chained to resolve ({verb})"
            )
        return f"{where} is {self.what} ({verb})"


@dataclass(frozen=True)
class Automation:
    """The automation paths of one night, and those its spec allows."""

    allow: tuple[str, ...] = ()
    """``[predicate] allow_automation`` globs, matched as written (case included)."""
    _allowed: tuple[Callable[[str], bool], ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_allowed", tuple(path_matcher(g) for g in self.allow))

    def allows(self, change: AutomationChange) -> bool:
        rel = change.reaches.strip("/")
        return any(matches(rel) for matches in self._allowed)

    def split(
        self, found: Sequence[AutomationChange]
    ) -> tuple[list[AutomationChange], list[AutomationChange]]:
        """``(blocked, allowed)``."""
        blocked = [a for a in found if not self.allows(a)]
        allowed = [a for a in found if self.allows(a)]
        return blocked, allowed


def automation_changes(
    changes: Iterable[ChangedPath],
    new_links: Mapping[str, str | None] | None = None,
    base_links: Mapping[str, str] | None = None,
) -> list[AutomationChange]:
    """Each change that changes what runs by itself, in the order given. ``new_links``: the
    changed paths that are symbolic links in the candidate, with their targets (None:
    unreadable); ``base_links``: every symbolic link of the branch's tree, with its target."""
    new_links = new_links or {}
    base_links = base_links or {}
    listed = list(changes)
    touched = {c.path for c in listed}
    after = {p: t for p, t in base_links.items() if p not in touched}
    after.update({p: t for p, t in new_links.items() if t is not None})
    steps = Steps()
    found: dict[str, AutomationChange] = {}
    for c in listed:
        try:
            hit = _own(c, new_links, base_links, after, steps)
        except TooCostly:
            hit = AutomationChange(c.path, c.status, "", c.path, "costly link")
        if hit is not None:
            found[c.path] = hit
    rest = [c for c in listed if c.path not in found]
    for links in (base_links, after):
        try:
            hits = _through_links(rest, links, steps)
        except TooCostly:  # what the links reach is unknown: every change counts
            hits = [AutomationChange(c.path, c.status, "", c.path, "costly link") for c in rest]
        for hit in hits:
            found.setdefault(hit.path, hit)
    return [found[c.path] for c in listed if c.path in found]


def _own(
    c: ChangedPath,
    new_links: Mapping[str, str | None],
    base_links: Mapping[str, str],
    after: Mapping[str, str],
    steps: Steps,
) -> AutomationChange | None:
    what = file_rule(c.path)
    if what is not None:
        return AutomationChange(c.path, c.status, what, c.path)
    if c.path in new_links or c.path in base_links:
        as_link = link_rule(c.path)
        if as_link is not None:
            return AutomationChange(c.path, c.status, as_link[0], c.path, "directory link")
    if c.path not in new_links:
        return None
    target = new_links[c.path]
    if target is None:
        return AutomationChange(c.path, c.status, "a symbolic link", c.path, "unreadable link")
    real, _visited = resolve(c.path, after, steps)
    for reached in dict.fromkeys([_target_path(c.path, target), real or ""]):
        as_link = link_rule(reached) if reached else None
        if as_link is not None:
            return AutomationChange(c.path, c.status, as_link[0], reached, "link target")
    return None


def _through_links(
    changes: Sequence[ChangedPath], links: Mapping[str, str], steps: Steps
) -> list[AutomationChange]:
    """Changes to what an automation link of ``links`` resolves to, or passes through on the
    way."""
    if not changes:
        return []
    reached: dict[str, tuple[str, str]] = {}
    for link in links:
        rule = link_rule(link)
        if rule is None:
            continue
        real, visited = resolve(link, links, steps)
        for place in [*visited[1:], *([real] if real else [])]:
            reached.setdefault(place, (link, rule[0]))
    hits: list[AutomationChange] = []
    if not reached:
        return hits
    for c in changes:
        parts = c.path.split("/")
        for depth in range(len(parts), 0, -1):
            found = reached.get("/".join(parts[:depth]))
            if found is not None and found[0] != c.path:
                link, what = found
                hits.append(AutomationChange(c.path, c.status, what, link, "through link"))
                break
    return hits

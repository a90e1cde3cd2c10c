"""What judges the work, and the changes an agent may not make to it.

A task's candidate is compared with the last verified commit before any verify or predicate
runs; a change to a protected path parks the task ("changed what judges it"). Protected:

* the ``[predicate] protect`` globs (default ``DEFAULT_PROTECT``: the usual test machinery);
* with the default, also every file and directory of the repository that the predicate or a
  seed task's verify command names (``python3 scripts/check.py``, ``pytest tests/unit``,
  ``python -m tools.gate``), and the file its runner reads (``make`` reads the Makefile);
* always: a nested git repository (git would commit it as a gitlink); compiled bytecode
  (``*.pyc`` and ``__pycache__/``: an unchecked hash-based ``.pyc`` runs instead of its
  source, whatever the source says); import machinery at any depth (``*.dist-info/`` and
  ``*.egg-info/`` metadata, whose entry points register pytest plugins; ``*.pth`` files;
  ``sitecustomize.py`` and ``usercustomize.py``); and a new top-level module or package
  named like a standard-library or installed module (``pytest.py``, ``unittest/``): with
  the worktree first on ``sys.path``, it would replace the test runner.

Creating a file is a change like any other: a new ``conftest.py`` forges a verdict as well as
an edited one.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from overnight.core.globs import path_matcher

#: The usual test machinery: tests, their configuration, and the runners' config files.
DEFAULT_PROTECT: tuple[str, ...] = (
    "**/tests/**",
    "**/test/**",
    "test_*.py",
    "*_test.py",
    "tests.py",
    "*_tests.py",
    "**/conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "pytest.toml",
    ".pytest.toml",
    "tox.ini",
    "setup.cfg",
    "pyproject.toml",
    "noxfile.py",
)

_GLOB_CHARS = frozenset("*?[{")

#: The files that say what a runner does, by the program that reads them: a predicate
#: ``make test`` is judged by the Makefile as much as by the tests.
RUNNER_FILES: dict[str, tuple[str, ...]] = {
    "make": ("Makefile", "makefile", "GNUmakefile"),
    "just": ("justfile", "Justfile", ".justfile"),
    "npm": ("package.json",),
    "yarn": ("package.json",),
    "pnpm": ("package.json",),
    "cargo": ("Cargo.toml",),
    "tox": ("tox.ini",),
    "nox": ("noxfile.py",),
}


@dataclass(frozen=True)
class ChangedPath:
    """One path a candidate changes: ``status`` A (added), M, D or T; ``nested_repository``
    for a gitlink."""

    status: str
    path: str
    nested_repository: bool = False


@dataclass(frozen=True)
class Protection:
    """The protected paths of one run."""

    globs: tuple[str, ...] = DEFAULT_PROTECT
    named: frozenset[str] = frozenset()
    """Files the predicate and the seed verify commands name."""
    named_dirs: frozenset[str] = frozenset()
    """Directories they name (everything under them is protected)."""
    runner_modules: frozenset[str] = frozenset()
    """Module names a new top-level file or directory may not take."""
    base_top_level: frozenset[str] = frozenset()
    """Top-level names that already exist at the base commit (the project's own)."""
    gate_configs: tuple[tuple[str, str], ...] = ()
    """``(path, gate)``: the files that configure the spec's gates (``[[gates]]``), protected
    whatever ``globs`` says, so that no candidate can silence a rule."""
    _matchers: tuple[tuple[str, Callable[[str], bool]], ...] = field(
        default=(), repr=False, compare=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "_matchers", tuple((g, path_matcher(g)) for g in self.globs))

    def rule_for(self, path: str) -> str | None:
        """Why ``path`` (relative, ``/``) is protected, or None."""
        rel = path.strip("/")
        for glob, matches in self._matchers:
            if matches(rel):
                return f"matches protect glob {glob!r}"
        if rel in self.named:
            return "named by the goal predicate or a verify command"
        for config, gate in self.gate_configs:
            if rel == config:
                return f"configures the gate {gate!r}"
        for d in self.named_dirs:
            if rel == d or rel.startswith(d + "/"):
                return f"under {d}/, named by the goal predicate or a verify command"
        return None

    def shadowing(self, path: str) -> str | None:
        """The module a newly added ``path`` would shadow, or None."""
        top, _, rest = path.strip("/").partition("/")
        if top in self.base_top_level:
            return None
        name = top
        if not rest:
            for suffix in (".py", ".pyc", ".pyw"):
                if top.endswith(suffix):
                    name = top[: -len(suffix)]
                    break
            else:
                if "." in top:
                    name = top.split(".", 1)[0]
                    if not top.endswith((".so", ".pyd")):
                        return None
        return name if name in self.runner_modules else None

    def violations(self, changes: Iterable[ChangedPath]) -> list[str]:
        """One sentence per change that touches what judges the work, each starting with the
        path and the rule (``"`pkg/x.pth` is import machinery (created): ..."``)."""
        return [sentence for _path, sentence in self.judged(changes)]

    def judged(self, changes: Iterable[ChangedPath]) -> list[tuple[str, str]]:
        """``(path, sentence)`` for each change that touches what judges the work."""
        found: list[tuple[str, str]] = []
        for change in changes:
            sentence = self._sentence(change)
            if sentence is not None:
                found.append((change.path, sentence))
        return found

    def _sentence(self, change: ChangedPath) -> str | None:
        where, verb = f"`{change.path}`", _verb(change.status)
        if change.nested_repository:
            return (
                f"{where} is a nested git repository ({verb}): git would record it as a submodule"
            )
        if _is_bytecode(change.path) and change.status != "D":
            return f"{where} is compiled bytecode ({verb}): Python may run it instead of its source"
        machinery = import_machinery(change.path)
        if machinery is not None and change.status != "D":
            return f"{where} is import machinery ({verb}): {machinery}"
        rule = self.rule_for(change.path)
        if rule is not None:
            return f"{where} is protected ({verb}): {rule}"
        if change.status == "A":
            module = self.shadowing(change.path)
            if module is not None:
                return (
                    f"{where} shadows the installed module {module!r} (created): with the "
                    "worktree first on sys.path it would replace it"
                )
        return None


def import_machinery(path: str) -> str | None:
    """Why a file at ``path`` can change what Python imports or runs before any test does,
    or None: package metadata (entry points load plugins), ``.pth`` files and the start-up
    modules, at any depth."""
    parts = path.strip("/").split("/")
    for part in parts[:-1]:
        if part.endswith((".dist-info", ".egg-info")):
            return "package metadata, whose entry points can load a plugin into the test runner"
    name = parts[-1]
    if name.endswith(".pth"):
        return "a .pth file, which Python's site module runs at start-up"
    if name in ("sitecustomize.py", "usercustomize.py"):
        return "a module Python imports by itself at start-up"
    return None


def _is_bytecode(path: str) -> bool:
    parts = path.strip("/").split("/")
    return "__pycache__" in parts[:-1] or parts[-1].endswith((".pyc", ".pyo"))


#: Modules Python imports by itself at start-up when they are on ``sys.path``.
STARTUP_MODULES = frozenset({"sitecustomize", "usercustomize"})


def _verb(status: str) -> str:
    return {"A": "created", "D": "deleted", "T": "type changed"}.get(status, "changed")


def named_paths(commands: Sequence[str]) -> list[str]:
    """The relative paths (and ``-m`` modules as paths) that ``commands`` mention; the caller
    keeps those that exist in the repository."""
    found: list[str] = []
    for command in commands:
        try:
            words = shlex.split(command)
        except ValueError:
            words = command.split()
        if words:
            found += RUNNER_FILES.get(posixpath.basename(words[0]), ())
        module_next = False
        for word in words:
            if module_next:
                module_next = False
                base = word.replace(".", "/")
                found += [base, f"{base}.py"]
                continue
            if word == "-m":
                module_next = True
                continue
            if word.startswith("-"):
                _, eq, value = word.partition("=")
                if not eq:
                    continue
                word = value
            if not word or _GLOB_CHARS & set(word) or word.startswith(("/", "~", "$")):
                continue
            rel = posixpath.normpath(word)
            if rel in (".", "") or rel.startswith("../") or rel == "..":
                continue
            found.append(rel)
    return list(dict.fromkeys(found))


def build_protection(
    globs: Sequence[str] | None,
    commands: Sequence[str],
    files: set[str],
    dirs: set[str],
    runner_modules: Iterable[str],
    gate_configs: Iterable[tuple[str, str]] = (),
) -> Protection:
    """The run's protection: ``globs`` (None: the defaults plus what ``commands`` name among
    the base tree's ``files`` and ``dirs``), and the files that configure the gates
    (``gate_configs``: path and gate, present at the base or not)."""
    named: set[str] = set()
    named_dirs: set[str] = set()
    if globs is None:
        for rel in named_paths(commands):
            if rel in files:
                named.add(rel)
            elif rel in dirs:
                named_dirs.add(rel)
    tops = {p.split("/", 1)[0] for p in files | dirs}
    tops |= {t[: -len(".py")] for t in tops if t.endswith(".py")}
    return Protection(
        globs=tuple(DEFAULT_PROTECT if globs is None else globs),
        named=frozenset(named),
        named_dirs=frozenset(named_dirs),
        runner_modules=frozenset(runner_modules) | STARTUP_MODULES,
        base_top_level=frozenset(tops),
        gate_configs=tuple(dict.fromkeys(gate_configs)),
    )

"""The package's shape: every module imports on its own, no import cycle (not even one hidden
behind a function-level or type-checking import), no private name used across modules, a pure
``core``, and the public API importable from the package itself."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

import overnight

SRC = Path(overnight.__file__).parent
#: Bundled example workspaces: copied into a repository by the demo, not package code.
EXAMPLES = SRC / "examples"

#: What ``core`` may import: the language's pure modules and its own.
PURE = {
    "__future__",
    "collections",
    "collections.abc",
    "dataclasses",
    "decimal",
    "enum",
    "fractions",
    "functools",
    "hashlib",
    "itertools",
    "math",
    "posixpath",
    "pydantic",
    "re",
    "shlex",
    "string",
    "typing",
    "unicodedata",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules() -> dict[str, Path]:
    return {
        module_name(p): p
        for p in sorted(SRC.rglob("*.py"))
        if not p.is_relative_to(EXAMPLES) and "__pycache__" not in p.parts
    }


MODULES = package_modules()


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    """The module imported (a submodule when ``from pkg import submodule``)."""
    names: tuple[str, ...]
    line: int


def imports_in(name: str, path: Path) -> Iterator[Import]:
    """Every import statement of the module, wherever it is (top level, a function, a
    ``TYPE_CHECKING`` block)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(name, alias.name, (), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0]
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            names = tuple(a.name for a in node.names)
            yield Import(name, target, names, node.lineno)


def edges() -> dict[str, set[str]]:
    """Module -> the package modules it imports. ``from pkg import sub`` counts as importing
    ``pkg.sub``; the root package re-exports lazily, so an import of ``overnight`` itself
    names no module."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for name, path in MODULES.items():
        for imp in imports_in(name, path):
            if not imp.target.startswith("overnight"):
                continue
            targets = {f"{imp.target}.{n}" for n in imp.names if f"{imp.target}.{n}" in MODULES}
            names_a_module_attr = len(targets) < len(imp.names) or not imp.names
            if imp.target != "overnight" and imp.target in MODULES and names_a_module_attr:
                targets.add(imp.target)
            graph[name] |= {t for t in targets if t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_check_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_anywhere_in_the_package() -> None:
    graph = edges()
    assert sum(len(v) for v in graph.values()) > 200  # the graph was actually read
    assert cycles(graph) == []


def test_every_module_imports_on_its_own() -> None:
    def load(name: str) -> tuple[str, int, str]:
        done = subprocess.run(
            [sys.executable, "-c", f"import {name}"], capture_output=True, text=True, timeout=120
        )
        return name, done.returncode, done.stderr[-2000:]

    with ThreadPoolExecutor(max_workers=4) as pool:
        failed = [(n, err) for n, rc, err in pool.map(load, sorted(MODULES)) if rc != 0]
    assert failed == []


def test_no_private_name_is_imported_from_another_module() -> None:
    crossings = []
    for name, path in MODULES.items():
        for imp in imports_in(name, path):
            if not imp.target.startswith("overnight") or imp.target == name:
                continue
            crossings += [
                f"{name}:{imp.line} imports {imp.target}.{n}"
                for n in imp.names
                if n.startswith("_") and not n.startswith("__")
            ]
    assert crossings == []


def test_no_private_attribute_of_another_module_is_used() -> None:
    """``import overnight.x as m; m._helper()`` is the same crossing by another route."""
    uses = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text())
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("overnight"):
                for a in node.names:
                    if f"{node.module}.{a.name}" in MODULES:
                        aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("overnight") and a.asname:
                        aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                uses.append(f"{name}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
    assert uses == []


def test_core_imports_nothing_with_io() -> None:
    core = {
        n: p for n, p in MODULES.items() if n == "overnight.core" or n.startswith("overnight.core.")
    }
    assert len(core) > 8
    impure = [
        f"{imp.source}:{imp.line} imports {imp.target}"
        for name, path in core.items()
        for imp in imports_in(name, path)
        if not imp.target.startswith("overnight.core") and imp.target not in PURE
    ]
    assert impure == []


def test_only_the_composition_module_names_the_concrete_parts() -> None:
    """The night depends on the seams; the classes behind them are named in one place."""
    concrete = {"SqliteEffectStore", "AgentExecutor", "Toolbox", "build_client", "ModelGateway"}
    naming = {
        name
        for name in ("overnight.night.night", "overnight.night.runs", "overnight.night.planner")
        for imp in imports_in(name, MODULES[name])
        if concrete & set(imp.names)
    }
    # the planner and the finish are handed the gateway; only compose builds one
    assert naming <= {"overnight.night.planner"}


@pytest.mark.parametrize(
    "name",
    [
        *("run", "resume", "load_spec", "Result", "Event", "Spec", "ConfigError", "Signals"),
        *("ModelClient", "TaskExecutor", "Tool", "EffectStore", "Clock"),
    ],
)
def test_the_public_api_is_importable_from_the_package(name: str) -> None:
    assert name in overnight.__all__
    assert getattr(overnight, name) is not None


def test_importing_one_module_does_not_import_the_night() -> None:
    """The package re-exports lazily: a core module alone stays light."""
    code = "import sys, overnight.core.budget; print('overnight.night.night' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


#: Module basenames that more than one module may share, each with exactly the modules that
#: share it. One name per concern: two modules of one name must be the same kind of thing in
#: parallel packages, so that the name alone says what either is.
PARALLEL_TWINS: dict[str, set[str]] = {
    # ``cli/<command>.py`` is the command line of what it names; ``config/<section>.py`` is the
    # model of that section of ``night.toml``, beside the package that acts on it.
    "alerts.py": {"config/alerts.py", "night/alerts.py"},
    "demo.py": {"demo.py", "cli/demo.py"},
    "estimate.py": {"config/estimate.py", "cli/estimate.py"},
    "fleet.py": {"config/fleet.py", "cli/fleet.py"},
    "reprice.py": {"estimate/reprice.py", "cli/reprice.py"},
    # ``fleet/<seam>.py`` is the seam on PostgreSQL; ``audit/<claim>.py`` that claim of a
    # result recomputed from the run's raw files.
    "effects.py": {"audit/effects.py", "fleet/effects.py"},
    "money.py": {"audit/money.py", "fleet/money.py"},
    # the entry point of a reader of a run directory (``audit_run``, ``overnight replay``)
    "run.py": {"audit/run.py", "replay/run.py"},
}

#: Shared names that are not the same kind of thing, left for a later rename. This list only
#: shrinks: a new module takes a name of its own.
NOT_YET_RENAMED: dict[str, set[str]] = {
    "answers.py": {"messages/answers.py", "store/answers.py"},
    "command.py": {"executors/command.py", "tools/command.py"},
    "commands.py": {"cli/commands.py", "night/commands.py"},
    "model.py": {"audit/model.py", "replay/model.py"},
    "report.py": {"calibration/report.py", "fleet/report.py"},
    "shell.py": {"core/shell.py", "tools/shell.py"},
    "view.py": {"report/view.py", "sandbox/view.py"},
}


def shared_basenames() -> dict[str, set[str]]:
    """Module basename -> the modules (relative to the package) of that name, for every name
    more than one module has (``__init__.py`` and ``__main__.py`` aside)."""
    by_name: dict[str, set[str]] = {}
    for path in MODULES.values():
        if path.name not in ("__init__.py", "__main__.py"):
            by_name.setdefault(path.name, set()).add(path.relative_to(SRC).as_posix())
    return {name: paths for name, paths in by_name.items() if len(paths) > 1}


def test_no_two_modules_share_a_name_unless_they_are_parallel() -> None:
    allowed = PARALLEL_TWINS | NOT_YET_RENAMED
    assert not PARALLEL_TWINS.keys() & NOT_YET_RENAMED.keys()
    shared = shared_basenames()
    assert len(MODULES) > 100  # the package was actually read
    # a name shared by modules the allowlist does not name, or an entry no longer needed
    assert {n: p for n, p in shared.items() if allowed.get(n) != p} == {}
    assert sorted(allowed.keys() - shared.keys()) == []


def test_the_name_check_finds_a_shared_name() -> None:
    assert shared_basenames()["run.py"] == {"audit/run.py", "replay/run.py"}
    assert "__init__.py" not in shared_basenames()

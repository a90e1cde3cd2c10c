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
#: parallel packages, so that the name alone says what either is; a new module of another kind
#: takes a name of its own.
PARALLEL_TWINS: dict[str, set[str]] = {
    # ``cli/<command>.py`` is the command line of what it names; ``config/<section>.py`` is the
    # model of that section of ``night.toml``, beside the package that acts on it.
    "alerts.py": {"config/alerts.py", "night/alerts.py"},
    "demo.py": {"demo.py", "cli/demo.py"},
    "estimate.py": {"config/estimate.py", "cli/estimate.py"},
    "fleet.py": {"config/fleet.py", "cli/fleet.py"},
    "gates.py": {"config/gates.py", "night/gates.py"},
    "reprice.py": {"estimate/reprice.py", "cli/reprice.py"},
    # ``fleet/<seam>.py`` is the seam on PostgreSQL; ``audit/<claim>.py`` that claim of a
    # result recomputed from the run's raw files.
    "effects.py": {"audit/effects.py", "fleet/effects.py"},
    "money.py": {"audit/money.py", "fleet/money.py"},
    # the entry point of a reader of a run directory (``audit_run``, ``overnight replay``)
    "run.py": {"audit/run.py", "replay/run.py"},
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
    shared = shared_basenames()
    assert len(MODULES) > 100  # the package was actually read
    # a name shared by modules the allowlist does not name, or an entry no longer needed
    assert {n: p for n, p in shared.items() if PARALLEL_TWINS.get(n) != p} == {}
    assert sorted(PARALLEL_TWINS.keys() - shared.keys()) == []


def test_the_name_check_finds_a_shared_name() -> None:
    assert shared_basenames()["run.py"] == {"audit/run.py", "replay/run.py"}
    assert "__init__.py" not in shared_basenames()


#: The modules of ``overnight.night`` that may take a whole ``Spec``: where a spec is checked
#: (``preflight``), resolved once (``resolve``), composed into a night's collaborators
#: (``compose``) and written into a run directory (``runs``). Every other module of the night,
#: and ``overnight.telemetry``, is handed the sections of the spec it reads.
TAKES_A_SPEC = {
    "overnight.night.compose",
    "overnight.night.preflight",
    "overnight.night.resolve",
    "overnight.night.runs",
}


def names_spec(annotation: ast.expr | None) -> bool:
    """Whether an annotation names the whole ``Spec`` (``Spec``, ``Spec | None``,
    ``spec.Spec``, ``"Spec"``); a section's model (``PredicateSpec``) is another name."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return False
    if annotation is None:
        return False
    return any(
        (isinstance(node, ast.Name) and node.id == "Spec")
        or (isinstance(node, ast.Attribute) and node.attr == "Spec")
        for node in ast.walk(annotation)
    )


def spec_takers(module: str, source: str) -> list[str]:
    """Every parameter of a function or method, and every field of a class (a dataclass's),
    annotated with the whole ``Spec``: ``module:line where name: annotation``."""
    found: list[str] = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                a = child.args
                extra = [p for p in (a.vararg, a.kwarg) if p is not None]
                for param in [*a.posonlyargs, *a.args, *a.kwonlyargs, *extra]:
                    if names_spec(param.annotation):
                        said = ast.unparse(param.annotation) if param.annotation else ""
                        found.append(
                            f"{module}:{param.lineno} {where}{child.name}() takes "
                            f"{param.arg}: {said}"
                        )
                visit(child, f"{where}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                for item in child.body:
                    if isinstance(item, ast.AnnAssign) and names_spec(item.annotation):
                        found.append(
                            f"{module}:{item.lineno} {where}{child.name}.{ast.unparse(item.target)}"
                            f" is a field: {ast.unparse(item.annotation)}"
                        )
                visit(child, f"{where}{child.name}.")
            else:
                visit(child, where)

    visit(ast.parse(source), "")
    return found


def test_the_spec_check_finds_a_whole_spec_taken() -> None:
    source = """
from dataclasses import dataclass

class Verdicts:
    def __init__(self, spec: Spec, run: RunSpec) -> None: ...

@dataclass(frozen=True)
class Facts:
    spec: config.Spec | None
    predicate: PredicateSpec

def check(*, spec: "Spec", model: ModelSpec | None) -> None:
    def inner(*specs: Spec) -> None: ...
"""
    assert spec_takers("m", source) == [
        "m:5 Verdicts.__init__() takes spec: Spec",
        "m:9 Facts.spec is a field: config.Spec | None",
        "m:12 check() takes spec: 'Spec'",
        "m:13 check.inner() takes specs: Spec",
    ]


def test_nothing_downstream_of_the_resolution_takes_a_whole_spec() -> None:
    """A collaborator a night is built from is handed the parts of the spec it reads (a
    section's model such as ``PredicateSpec``, or plain values), so that its signature says
    what it depends on; only the resolution, the checks, the composition and the runs take a
    whole ``Spec``."""
    night = {n for n in MODULES if n.startswith("overnight.night.")}
    telemetry = {n for n in MODULES if n.startswith("overnight.telemetry.")}
    assert night >= TAKES_A_SPEC and len(night) > 20 and telemetry  # the package was read
    offenders = [
        found
        for name in sorted((night - TAKES_A_SPEC) | telemetry)
        for found in spec_takers(name, MODULES[name].read_text())
    ]
    assert offenders == [], (
        "hand these the sections of the spec they read, not the whole Spec: " + "; ".join(offenders)
    )
    # each module allowed a whole Spec still takes one (an entry no longer needed goes)
    assert [n for n in sorted(TAKES_A_SPEC) if not spec_takers(n, MODULES[n].read_text())] == []

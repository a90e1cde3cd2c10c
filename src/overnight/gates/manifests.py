"""Dependency manifests, and whether a change to one changes the dependencies.

A candidate that adds, removes or re-pins a dependency changes what the project installs,
which its tests alone do not show; such a change is named for people. A manifest's edit
that leaves the dependencies as they were (a comment in ``requirements.txt``, a new
``[tool.ruff]`` setting in ``pyproject.toml``) is not one: structured manifests are parsed
on both sides and only their dependency tables compared. Lockfiles are compared byte for
byte, since any change to one changes what is installed.

Paths are POSIX paths relative to the repository's top; a manifest counts at any depth.
"""

from __future__ import annotations

import configparser
import json
import posixpath
import re
import tomllib
from collections.abc import Callable

from overnight.core.globs import path_matcher

#: Requirement lists, read line by line (comments and blank lines do not count).
REQUIREMENTS_GLOBS: tuple[str, ...] = (
    "*requirements*.txt",
    "**/requirements/*.txt",
    "*requirements*.in",
    "**/requirements/*.in",
    "constraints*.txt",
)
#: Lockfiles: any change is a dependency change.
LOCKFILES: tuple[str, ...] = (
    "poetry.lock",
    "uv.lock",
    "Pipfile.lock",
    "pdm.lock",
    "package-lock.json",
    "yarn.lock",
    "pnpm-lock.yaml",
)
#: Manifests parsed to compare their dependency tables only.
STRUCTURED_MANIFESTS: tuple[str, ...] = ("pyproject.toml", "Pipfile", "setup.cfg", "package.json")

#: Every manifest, as glob patterns of ``overnight.core.globs`` (a pattern without ``/``
#: matches the file name at any depth).
MANIFEST_GLOBS: tuple[str, ...] = REQUIREMENTS_GLOBS + LOCKFILES + STRUCTURED_MANIFESTS

_REQUIREMENTS_MATCHERS = tuple(path_matcher(g) for g in REQUIREMENTS_GLOBS)
_MANIFEST_MATCHERS = tuple(path_matcher(g) for g in MANIFEST_GLOBS)

#: pip's comment rule: ``#`` at the start of a line or after a blank starts a comment (a
#: ``#`` inside a URL fragment such as ``#egg=`` does not).
_REQUIREMENT_COMMENT = re.compile(r"(^|\s)#.*$")
_BLANKS = re.compile(r"\s+")

#: The parts of a parsed TOML manifest that hold dependencies: (label, path of keys), where
#: ``*`` stands for every key at that level.
_PYPROJECT_TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("[project] dependencies", ("project", "dependencies")),
    ("[project] optional-dependencies", ("project", "optional-dependencies")),
    ("[build-system] requires", ("build-system", "requires")),
    ("[dependency-groups]", ("dependency-groups",)),
    ("[tool.poetry.dependencies]", ("tool", "poetry", "dependencies")),
    ("[tool.poetry.group.*.dependencies]", ("tool", "poetry", "group", "*", "dependencies")),
    ("[tool.poetry.dev-dependencies]", ("tool", "poetry", "dev-dependencies")),
    ("[tool.pdm.dev-dependencies]", ("tool", "pdm", "dev-dependencies")),
    ("[tool.uv] dev-dependencies", ("tool", "uv", "dev-dependencies")),
    # uv's overrides, constraints and sources change what is installed as much as the
    # requirement lists themselves do.
    ("[tool.uv] override-dependencies", ("tool", "uv", "override-dependencies")),
    ("[tool.uv] constraint-dependencies", ("tool", "uv", "constraint-dependencies")),
    ("[tool.uv.sources]", ("tool", "uv", "sources")),
)
_PIPFILE_TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("[packages]", ("packages",)),
    ("[dev-packages]", ("dev-packages",)),
)
_SETUP_CFG_OPTIONS: tuple[tuple[str, str], ...] = (
    ("options", "install_requires"),
    ("options", "setup_requires"),
)
_PACKAGE_JSON_FIELDS: tuple[str, ...] = (
    "dependencies",
    "devDependencies",
    "peerDependencies",
    "optionalDependencies",
)


def is_manifest(path: str) -> bool:
    """Whether ``path`` names a dependency manifest or lockfile (at any depth)."""
    return any(matches(path) for matches in _MANIFEST_MATCHERS)


def _canonical(value: object) -> object:
    """A parsed value in a form that compares equal when only its layout changed: blanks
    inside strings dropped, lists compared as sorted (the order of requirements does not
    change what is installed)."""
    if isinstance(value, str):
        return _BLANKS.sub("", value)
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted((_canonical(v) for v in value), key=repr)
    return value


def _lookup(doc: object, keys: tuple[str, ...]) -> object:
    """The value at ``keys`` in ``doc`` (``*`` collecting every key at its level), ``None``
    where it is absent."""
    if not keys:
        return doc
    if not isinstance(doc, dict):
        return None
    head, rest = keys[0], keys[1:]
    if head == "*":
        return {k: _lookup(v, rest) for k, v in sorted(doc.items())}
    return _lookup(doc.get(head), rest)


def _changed_tables(
    before: object, after: object, tables: tuple[tuple[str, tuple[str, ...]], ...]
) -> list[str]:
    return [
        label
        for label, keys in tables
        if _canonical(_lookup(before, keys)) != _canonical(_lookup(after, keys))
    ]


def _requirement_lines(text: str | None) -> list[str]:
    """The requirements of a requirements file, as sorted lines without comments, blanks or
    continuation backslashes."""
    if text is None:
        return []
    joined = re.sub(r"\\\r?\n", " ", text)
    lines = (_REQUIREMENT_COMMENT.sub("", line) for line in joined.splitlines())
    return sorted(_BLANKS.sub(" ", line).strip() for line in lines if line.strip())


def _verb(base_text: str | None, new_text: str | None) -> str:
    if base_text is None:
        return "adds"
    return "deletes" if new_text is None else "changes"


def _setup_cfg_dependencies(text: str) -> dict[str, object]:
    """The dependency options of a ``setup.cfg``, each as its requirement lines."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    sections = {name: dict(parser[name]) for name in parser.sections()}
    found: dict[str, object] = {}
    for section, option in _SETUP_CFG_OPTIONS:
        found[f"[{section}] {option}"] = _requirement_lines(sections.get(section, {}).get(option))
    extras = sections.get("options.extras_require", {})
    found["[options.extras_require]"] = {k: _requirement_lines(v) for k, v in extras.items()}
    return found


_SETUP_CFG_TABLES = tuple((label, (label,)) for label in _setup_cfg_dependencies(""))
_PACKAGE_JSON_TABLES = tuple((name, (name,)) for name in _PACKAGE_JSON_FIELDS)

#: How each structured manifest is read: (what it is written in, the parser, its tables).
_STRUCTURED: dict[
    str, tuple[str, Callable[[str], object], tuple[tuple[str, tuple[str, ...]], ...]]
] = {
    "pyproject.toml": ("TOML", tomllib.loads, _PYPROJECT_TABLES),
    "Pipfile": ("TOML", tomllib.loads, _PIPFILE_TABLES),
    "package.json": ("JSON", json.loads, _PACKAGE_JSON_TABLES),
    "setup.cfg": ("INI", _setup_cfg_dependencies, _SETUP_CFG_TABLES),
}


def _structured_change(name: str, base_text: str | None, new_text: str | None) -> list[str] | str:
    """The labels of the dependency tables that differ, or (a string) why one side cannot be
    read."""
    kind, parse, tables = _STRUCTURED[name]
    parsed: list[object] = []
    for side, text in (("before", base_text), ("after", new_text)):
        if text is None:  # absent: no dependencies at all
            # setup.cfg's parse gives every option, empty when missing: absent reads as empty.
            parsed.append(parse("") if kind == "INI" else {})
            continue
        try:
            parsed.append(parse(text))
        except (ValueError, configparser.Error) as exc:
            problem = (str(exc).splitlines() or [type(exc).__name__])[0]
            return f"does not parse as {kind} {side} the change ({problem})"
    return _changed_tables(parsed[0], parsed[1], tables)


def dependency_change(path: str, base_text: str | None, new_text: str | None) -> str | None:
    """One short sentence for people when the change to ``path`` changes the dependencies
    (``base_text`` None: the file is created; ``new_text`` None: deleted), else ``None``."""
    if base_text == new_text or not is_manifest(path):
        return None
    name = posixpath.basename(path)
    verb = _verb(base_text, new_text)
    if name in LOCKFILES:
        return f"{verb} the lockfile {path}"
    if any(matches(path) for matches in _REQUIREMENTS_MATCHERS):
        if _requirement_lines(base_text) == _requirement_lines(new_text):
            return None
        return f"{verb} the requirements in {path}"
    changed = _structured_change(name, base_text, new_text)
    if isinstance(changed, str):
        return f"changes {path}, which {changed}: its dependencies may have changed"
    if not changed:
        return None
    return f"{verb} the dependencies in {path} ({', '.join(changed)})"

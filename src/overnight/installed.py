"""The top-level module names the harness's Python can import: a new top-level file of the
agent's that takes one of these names would shadow it for the commands that judge the work."""

from __future__ import annotations

import os
import site
import sys
from functools import cache
from pathlib import Path

#: Endings of an importable file; extension modules carry a platform tag before the last dot.
_SOURCE = (".py", ".pyc", ".pyw")
_EXTENSION = (".so", ".pyd")


def _name_of(entry: str, is_dir: bool) -> str | None:
    if is_dir:
        # A package, or a namespace package's part (no __init__.py): both import by name.
        return entry if entry.isidentifier() else None
    for suffix in _SOURCE:
        if entry.endswith(suffix):
            stem = entry[: -len(suffix)]
            return stem if stem.isidentifier() else None
    if entry.endswith(_EXTENSION):
        stem = entry.split(".", 1)[0]
        return stem if stem.isidentifier() else None
    return None


def _site_places() -> list[str]:
    """The installation's site-packages directories and the directories their ``.pth`` files
    add (editable installs): where installed distributions put their modules."""
    sites = [*site.getsitepackages(), site.getusersitepackages()]
    places: list[str] = []
    for place in sites:
        if not os.path.isdir(place):
            continue
        places.append(place)
        for pth in sorted(Path(place).glob("*.pth")):
            try:
                lines = pth.read_text(errors="replace").splitlines()
            except OSError:
                continue
            for line in lines:
                line = line.strip()
                if not line or line.startswith(("#", "import ", "import\t")):
                    continue
                added = os.path.join(place, line)
                if os.path.isdir(added):
                    places.append(added)
    return places


@cache
def installed_module_names() -> frozenset[str]:
    """The standard library's module names and every top-level name in the installation's
    site-packages (and what their ``.pth`` files add).

    A listing of a few directories, once per process: ``importlib.metadata`` reads every
    distribution's file list for the same answer and costs a good part of a second."""
    names = set(sys.stdlib_module_names) | set(sys.builtin_module_names)
    for place in _site_places():
        try:
            entries = list(os.scandir(place))
        except OSError:
            continue
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                continue
            name = _name_of(entry.name, is_dir)
            if name is not None:
                names.add(name)
    return frozenset(names)

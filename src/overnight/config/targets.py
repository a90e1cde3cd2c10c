"""The import rules for user targets: a callable, a client or a tool named in the spec as
``module:attr``, imported from ``sys.path`` and the directories of an ``import_roots`` block."""

from __future__ import annotations

import importlib
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from overnight.core.errors import ConfigError

#: Directories a target may be imported from besides ``sys.path`` (see ``import_roots``).
_ROOTS: ContextVar[tuple[str, ...]] = ContextVar("overnight_import_roots", default=())

#: ``sys.path`` is the process's: nights set up in threads of one process (a fleet worker)
#: take turns changing it.
_IMPORT_PATH_LOCK = threading.RLock()


@contextmanager
def import_roots(*dirs: str | os.PathLike[str] | None) -> Iterator[None]:
    """Within this block, ``resolve_target`` also imports from ``dirs`` (the spec's directory,
    the workspace). They are on ``sys.path`` only while a target is being imported: the
    process's import path is the same after a target is resolved as before."""
    extra = tuple(str(d) for d in dirs if d)
    token = _ROOTS.set(tuple(dict.fromkeys((*extra, *_ROOTS.get()))))
    try:
        yield
    finally:
        _ROOTS.reset(token)


@contextmanager
def _on_import_path(dirs: tuple[str, ...]) -> Iterator[None]:
    """``dirs`` at the front of ``sys.path`` for the duration of the block; afterwards each
    entry this added is taken out again (whatever the imported code did to the list)."""
    with _IMPORT_PATH_LOCK:
        added = [d for d in dirs if d not in sys.path]
        sys.path[:0] = added
        try:
            yield
        finally:
            for d in added:
                if d in sys.path:
                    sys.path.remove(d)


def resolve_target(target: str, field: str) -> object:
    """Import ``module:attr`` (attr may be dotted), also from the directories of the enclosing
    ``import_roots`` block. Failures are configuration errors."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(
            field, f"{target!r} is not of the form module:attr", "e.g. mypkg.fakes:model"
        )
    try:
        with _on_import_path(_ROOTS.get()):
            obj: object = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:  # an import can fail in any way user code can
        raise ConfigError(
            field,
            f"cannot import module {module_name!r}: "
            f"{exc if isinstance(exc, Exception) else repr(exc)}",
            "check the module is on PYTHONPATH (or in the spec's directory)",
        ) from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(field, f"{module_name} has no attribute {attr!r}", "check the name")
        obj = getattr(obj, part)
    return obj

"""How the harness runs a check (the goal predicate, a verify) and what it adds to it.

Two additions, for every check, sandboxed or not:

* **The project's layout.** ``PYTHONPATH`` starts with the checkout's ``src/`` (when it is a
  directory) and the checkout's root, so that a src layout, a namespace package, or tests
  that import the package by name run on the clean checkout as they do in the user's
  checkout; an editable install of the user's checkout (which points into the workspace the
  sandbox hides, and would test the workspace rather than the candidate) comes after them.
  The agent's ``run_command`` gets the same for the worktree.
* **Positive evidence**, for a command that runs pytest (``runs_pytest``): plugin autoload is
  off (``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``; the spec's ``[predicate] pytest_plugins`` are
  loaded with ``-p``), and the harness's own reporter (``pytest_evidence``, copied under a
  name of its own for each run into a private directory, bound read-only into the sandbox)
  writes each test's outcome to a file the harness opened outside the sandbox and handed to
  the command as an inherited descriptor; ``overnight.core.evidence`` judges it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import IO, Any

from overnight.core.errors import WorkspaceError
from overnight.core.evidence import RunReport, Unreadable, read_run
from overnight.night import git
from overnight.process import Confinement, WithAdditions, scrubbed_env

#: Lines longer than this are not the reporter's: it bounds every line it writes (a long
#: node id is written as a prefix and a digest, other text is cut) well below this.
MAX_LINE = 1 << 16

#: The reporter's evidence is read up to this size; a run that wrote more is judged on what
#: was read and marked truncated (never met).
MAX_EVIDENCE_BYTES = 64 << 20

_PLUGIN_SOURCE = "pytest_evidence.py"


def layout_path(root: Path) -> list[str]:
    """The ``PYTHONPATH`` entries a checkout at ``root`` needs: its ``src/`` when that is a
    real directory, then the root itself."""
    entries: list[str] = []
    src = root / "src"
    with contextlib.suppress(OSError):
        if src.is_dir() and not src.is_symlink():
            entries.append(str(src))
    entries.append(str(root))
    return entries


@dataclass
class Reporter:
    """One pytest command's reporter: a private copy of the plugin, and the file it writes
    to (open, its descriptor inherited by the command)."""

    directory: Path
    module: str
    sink: IO[bytes]
    plugins: Sequence[str] = ()
    complete: bool = False
    """A base record: the options that stop or narrow a run early are turned off."""

    @property
    def plugin_file(self) -> Path:
        return self.directory / f"{self.module}.py"

    @property
    def fd(self) -> int:
        return self.sink.fileno()

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        """What pytest needs to load the reporter (and only the plugins the spec lists)."""
        words = ["-p", self.module]
        for plugin in self.plugins:
            words += ["-p", plugin]
        addopts = shlex.join(words)
        if base.get("PYTEST_ADDOPTS"):
            addopts = f"{addopts} {base['PYTEST_ADDOPTS']}"
        env = {
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "PYTEST_ADDOPTS": addopts,
            "OVERNIGHT_EVIDENCE_FD": str(self.fd),
            # Test ids built from a set's order (parametrize over a set) change with the
            # hash seed: one seed for every run, so the base's ids are the candidate's.
            "PYTHONHASHSEED": base.get("PYTHONHASHSEED") or "0",
        }
        if self.complete:
            env["OVERNIGHT_EVIDENCE_COMPLETE"] = "1"
        return env

    def read(self) -> RunReport:
        """What the reporter wrote, bounded by ``MAX_EVIDENCE_BYTES``."""
        self.sink.flush()
        size = os.fstat(self.fd).st_size
        self.sink.seek(0)
        data = self.sink.read(MAX_EVIDENCE_BYTES)
        events = (_event(line) for line in data.split(b"\n") if line.strip())
        return read_run(events, truncated=size > MAX_EVIDENCE_BYTES)


_NODEID = re.compile(rb'"nodeid":\s*"((?:[^"\\]|\\.){1,400})')


def _event(line: bytes) -> dict[str, Any] | Unreadable:
    """One line of the reporter's, decoded; for anything else, what it is and why not."""
    if len(line) > MAX_LINE:
        return Unreadable(
            len(line),
            f"longer than the {MAX_LINE:,} bytes a line of the reporter's can be",
            _named_test(line[:4096]),
        )
    try:
        event = json.loads(line)
    except ValueError as exc:
        return Unreadable(len(line), f"not JSON ({exc})", _named_test(line[:4096]))
    if not isinstance(event, dict):
        return Unreadable(len(line), f"a JSON {type(event).__name__}, not an object")
    return event


def _named_test(head: bytes) -> str:
    """The test a line names near its start, for saying which test an unreadable line is
    about (its first 200 characters)."""
    found = _NODEID.search(head)
    if found is None:
        return ""
    try:
        text = json.loads(b'"' + found.group(1) + b'"')
    except ValueError:
        text = found.group(1).decode("utf-8", "replace")
    return str(text)[:200]


@contextlib.contextmanager
def pytest_evidence(plugins: Sequence[str] = (), *, complete: bool = False) -> Iterator[Reporter]:
    """A reporter for one pytest command; removed afterwards. ``complete``: the run records
    the base commit, every test runs (``-x``, ``--maxfail``, ``--sw``, ``--lf``... off)."""
    directory = Path(tempfile.mkdtemp(prefix="overnight-evidence-"))
    try:
        # Readable by the sandbox's user: the harness's own code, nothing secret.
        os.chmod(directory, 0o755)
        module = f"_overnight_evidence_{secrets.token_hex(8)}"
        source = resources.files("overnight.night").joinpath(_PLUGIN_SOURCE).read_bytes()
        plugin = directory / f"{module}.py"
        plugin.write_bytes(source)
        os.chmod(plugin, 0o644)
        with tempfile.TemporaryFile(prefix="evidence-", dir=directory) as sink:
            yield Reporter(directory, module, sink, tuple(plugins), complete)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def check_env(
    base: Mapping[str, str],
    roots: Sequence[Path],
    evidence: Reporter | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """``base`` with the layout for ``roots`` (on ``PYTHONPATH``; for pytest, handed to the
    reporter, which puts it on ``sys.path``), the reporter's settings when ``evidence`` is
    given, and ``extra``."""
    env = dict(base)
    entries: list[str] = []
    layout = [entry for root in roots for entry in layout_path(root)]
    if evidence is not None:
        # pytest: the reporter puts the layout on sys.path once the interpreter has started
        entries.append(str(evidence.directory))
        env.update(evidence.env(base))
        env["OVERNIGHT_EVIDENCE_PATH"] = os.pathsep.join(layout)
    else:
        entries += layout
    if base.get("PYTHONPATH"):
        entries.append(base["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(entries))
    env.update(extra or {})
    return env


def check_placement(
    confine: Confinement | None,
    roots: Sequence[Path],
    evidence: Reporter | None = None,
    extra: Mapping[str, str] | None = None,
) -> tuple[Confinement | None, dict[str, str] | None]:
    """How a check runs in ``roots``: ``confine`` with the additions of ``check_env`` when
    sandboxed, else the scrubbed environment with them (``(confinement, None)`` or
    ``(None, env)``)."""
    if confine is not None:
        return with_check_additions(confine, roots, evidence, extra), None
    return None, check_env(scrubbed_env(), roots, evidence, extra)


def with_check_additions(
    inner: Confinement,
    roots: Sequence[Path],
    evidence: Reporter | None = None,
    extra: Mapping[str, str] | None = None,
) -> WithAdditions:
    """``inner`` with the additions of ``check_env``."""
    env = check_env(inner.env, roots, evidence, extra)
    additions = {k: v for k, v in env.items() if inner.env.get(k) != v}
    files = (evidence.plugin_file,) if evidence is not None else ()
    return WithAdditions(inner, additions, files)


#: Words of code that reaches into the test runner or the process's end: a change holding one
#: is shown for a person to read ("touches the test runner"), whatever its verdict.
RUNNER_WORDS = (
    "pytest",
    "unittest",
    "pluginmanager",
    "gc.get_objects",
    "os._exit",
    "atexit",
    "sys.modules",
    "sys.settrace",
    "sys.setprofile",
    "builtins",
)


def runner_touches(git_dir: Path, commit: str, paths: Sequence[str]) -> list[str]:
    """Which of ``paths`` (files of ``commit``) hold one of ``RUNNER_WORDS``: ``git grep -F``
    (fixed strings, linear) on the commit's own objects, so that no checkout is written for
    it and nothing of the candidate runs; binary files are skipped, pathspecs are literal."""
    found: set[str] = set()
    for first in range(0, len(paths), 500):  # bounded command lines
        chunk = paths[first : first + 500]
        args = ["grep", "-z", "-l", "-I", "-F"]
        for word in RUNNER_WORDS:
            args += ["-e", word]
        args += [commit, "--", *chunk]
        env = git.git_env(extra={"GIT_LITERAL_PATHSPECS": "1"})
        try:
            done = git.raw(git.bare_args(git_dir, *args), cwd=git_dir, env=env)
        except (OSError, WorkspaceError):
            return []
        if done.returncode not in (0, 1):  # 1: no match
            return []
        for name in done.stdout.split(b"\0"):
            _, _, path = git.text(name).partition(":")
            found.add(path)
    return [p for p in paths if p in found]

"""The goal predicate, checked once before the night spends anything.

It runs on a clean export of the base commit (what the night's first check will see) and,
when the user's checkout holds files that commit lacks (ignored or untracked: a generated
``version.py``, a build directory), on the user's checkout too, to name what differs. A
predicate that cannot run there (exit 126 or 127; for pytest exit 2 to 5: collection errors,
an internal or usage error, no test; or no word from the harness's reporter) refuses the
night with a ``ConfigError``: exit 64, before the run directory exists. For pytest it also
records what the night must make pass (``BaseTests``): that run is the base record (every
test runs, ``-x`` and the like turned off) and the predicate's first verdict.

When pytest's output on the base says it did not know an option, an ini key, a marker or a
fixture (or ran ``async def`` tests under no plugin), the installed plugins that provide
them are found (``overnight.night.plugins``): a refusal names them and the exact
``[predicate] pytest_plugins = [...]`` line, and a base that ran gets a note saying the same.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from overnight.config.spec import PredicateSpec
from overnight.core.errors import ConfigError, WorkspaceError
from overnight.core.evidence import BaseTests, RunReport, Scope, base_tests
from overnight.core.places import WORKSPACE, Places
from overnight.core.resume import cannot_run_reason, runs_pytest
from overnight.core.state import PredicateRecord
from overnight.night import worktree as ws
from overnight.night.checkouts import RanCommand
from overnight.night.outputs import files_in, written_files
from overnight.night.plugins import (
    Advice,
    PytestConfig,
    advise,
    failed_names,
    installed_plugins,
    project_python,
    read_config,
)
from overnight.night.testrun import check_placement, pytest_evidence
from overnight.night.verdict import judged_predicate
from overnight.process import CommandResult, Confinement, run_command
from overnight.sandbox.policy import SandboxPolicy

#: Entries of the user's checkout that are caches, never a reason for a different outcome.
_CACHES = frozenset(
    {
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".hypothesis",
        ".tox",
        ".nox",
        ".venv",
        "venv",
        "node_modules",
    }
)

#: pytest's exits that mean its tests did not run as tests: interrupted (collection errors),
#: internal error, usage error, no tests collected.
_PYTEST_UNRUN = {2: "collection errors or interrupted", 3: "pytest internal error"}


@dataclass
class StartCheck:
    """What the check found: the base's tests, and notes for the report."""

    commit: str
    base: BaseTests | None = None
    notes: list[str] = field(default_factory=list)
    predicate: PredicateRecord | None = None
    """The predicate judged on the base commit, from the same run as the base record."""
    output: str = ""
    """What that run printed."""
    outputs: list[str] = field(default_factory=list)
    """Files the set-up and the predicate wrote in the clean checkout of the base commit."""
    config: PytestConfig = field(default_factory=PytestConfig)
    """The base commit's pytest configuration (``overnight check`` proposes the plugins it
    names)."""


@dataclass(frozen=True)
class _Outcome:
    result: CommandResult
    tests: RunReport | None

    def cannot_run(self, command: str) -> str | None:
        code = self.result.exit_code
        if self.result.timed_out:
            return None
        why = cannot_run_reason(code, command)
        if why is not None or self.tests is None:
            return why
        if code in _PYTEST_UNRUN:
            return f"exit {code}: {_PYTEST_UNRUN[code]}"
        if self.tests.collect_errors:
            return f"errors collecting {', '.join(self.tests.collect_errors[:5])}"
        if not self.tests.finished:
            return (
                f"exit {code}, and the harness's test reporter saw no pytest session finish "
                "(pytest did not start, or could not load the reporter)"
            )
        if not self.tests.collected:
            return "pytest collected no tests"
        return None

    def said(self) -> str:
        if self.result.timed_out:
            return "timed out"
        if self.result.exit_code == 0:
            return "met (exit 0)"
        return f"exit {self.result.exit_code}"


def check_predicate(
    predicate: PredicateSpec, workspace: Path, policy: SandboxPolicy, *, hours: float
) -> StartCheck:
    """Run the ``predicate`` (with its set-up) on the base commit of the repository at
    ``workspace`` (and in the user's checkout when they differ), for no longer than the
    night's ``hours``; raise ``ConfigError`` when it cannot run there."""
    repo = ws.check_repository(workspace)
    commit = ws.head(repo)
    command = predicate.command
    timeout = min(predicate.timeout_s, hours * 3600.0)
    pytest_plugins = predicate.pytest_plugins
    # The output of the run on the base commit is the predicate's first detail, which the
    # replan shows a model: its places are written as shown before it is cut to its tail.
    with _export(repo, commit) as where:
        places = Places.of(
            trees=ws.path_forms(where), named=[(f, WORKSPACE) for f in ws.path_forms(repo)]
        )
        exported = files_in(where)
        set_up_export(predicate, policy, where, commit)
        base = _run(pytest_plugins, policy, command, where, timeout, complete=True, places=places)
        config = read_config(where)  # the base commit's, as that run read it
        outputs = written_files(where, exported)
    check = StartCheck(commit, config=config, outputs=outputs)
    extra = _extra_files(repo)
    here: _Outcome | None = None
    base_why = base.cannot_run(command)
    # A base that fails as a bug makes it fail is the usual first night: the suite runs again
    # in the user's checkout only when it holds something a test could read or import.
    if extra and (base_why is not None or (base.result.exit_code != 0 and _may_matter(extra))):
        here = _run(pytest_plugins, policy, command, repo, timeout, user_checkout=True)
        if here.said() != base.said():
            check.notes.append(
                f"the goal predicate `{command}` gives a different outcome in your checkout "
                f"({here.said()}) than on a clean checkout of {commit[:12]} ({base.said()}), "
                "which is what the night judges; your checkout has files that commit lacks: "
                f"{_listed(extra)}"
            )
    differs = bool(check.notes)
    advice = _plugin_advice(predicate, policy, config, base)
    plugins = _plugins_note(base, base_why is not None, advice)
    if plugins:
        check.notes.append(plugins)
    if base_why is not None:
        tail = "\n".join(base.result.output.strip().splitlines()[-6:])
        notes = "".join(f" {note}." for note in check.notes)
        if advice is not None:
            raise ConfigError(
                "predicate.pytest_plugins",
                f"`{command}` cannot run on a clean checkout of the base commit {commit[:12]} "
                f"({base_why}); nothing was spent. {_sentence(advice.said())}{notes}\n"
                f"{tail}".rstrip(),
                advice.fix(),
            )
        named = mentioned(extra, base.result.output)
        if named:
            notes += (
                f" The failure mentions {_listed(named)}, which your checkout holds and the "
                "commit lacks (git ignores it, or it is untracked)."
            )
        raise ConfigError(
            "predicate.command",
            f"`{command}` cannot run on a clean checkout of the base commit {commit[:12]} "
            f"({base_why}); nothing was spent.{notes}\n{tail}".rstrip(),
            _setup_fix(named) if named else _fix(base_why, differs),
        )
    if base.tests is not None:
        check.base = base_tests(command, commit, base.tests)
    ran = RanCommand(base.result, timeout, False, base.tests)
    scope = (check.base, Scope()) if check.base is not None else None
    check.predicate = judged_predicate(ran, scope, places).model_copy(update={"at_start": True})
    check.output = base.result.output
    return check


def set_up_export(
    predicate: PredicateSpec, policy: SandboxPolicy, where: Path, commit: str
) -> None:
    """The spec's set-up command in the clean export, as every clean checkout of the night
    gets it; a failure refuses the night."""
    command = predicate.setup
    if command is None:
        return
    plugins = predicate.pytest_plugins
    result = _run(plugins, policy, command, where, predicate.setup_timeout_s).result
    if result.exit_code == 0 and not result.timed_out:
        return
    said = "timed out" if result.timed_out else f"exit {result.exit_code}"
    tail = "\n".join(result.output.strip().splitlines()[-6:])
    raise ConfigError(
        "predicate.setup",
        f"`{command}` failed on a clean checkout of the base commit {commit[:12]} ({said}); "
        f"nothing was spent.\n{tail}".rstrip(),
        "make the set-up command succeed on a fresh clone of the repository (it runs in the "
        "sandbox and can write only the checkout)",
    )


def mentioned(paths: list[str], output: str) -> list[str]:
    """Which of ``paths`` (files of the user's checkout that the commit lacks) ``output``
    names: as a path, a path under ``src/``, or a module (``isodate.version``)."""
    found = []
    for path in paths:
        bare = path.rstrip("/")
        names = {bare, bare.removeprefix("src/")}
        if bare.endswith(".py"):
            module = bare[: -len(".py")].removesuffix("/__init__")
            names |= {module.replace("/", "."), module.removeprefix("src/").replace("/", ".")}
        if any(len(name) > 3 and name in output for name in names):
            found.append(path)
    return found


def _setup_fix(named: list[str]) -> str:
    return (
        f"commit what the tests need ({_listed(named)}), or name a command that makes it in "
        "every clean checkout: "
        '[predicate] setup = "..." (run in the sandbox before each check, e.g. a code '
        "generator or `python setup.py build_ext --inplace`)"
    )


def _plugin_advice(
    predicate: PredicateSpec, policy: SandboxPolicy, config: PytestConfig, base: _Outcome
) -> Advice | None:
    """The plugins the base run lacked, when pytest's output says it did not know a name (or
    tests errored at set-up with plugins off): found in the predicate's Python, only then,
    so that a night whose base runs cleanly starts no finder."""
    command = predicate.command
    if not runs_pytest(command):
        return None
    failed = failed_names(base.result.output)
    tests = base.tests
    errored = tests is not None and bool(tests.plugins_off) and bool(tests.errored_at_setup())
    if not (failed or errored):
        return None
    # A sandboxed predicate does not see the home directory, so neither the user's
    # site-packages; in auto mode the start check runs as written.
    installed = installed_plugins(project_python(command), user_site=policy.mode != "on")
    advice = advise(installed, config, command, failed, predicate.pytest_plugins)
    return advice or None


def _plugins_note(base: _Outcome, cannot_run: bool, advice: Advice | None = None) -> str:
    """When the base run failed in a way a missing plugin explains, the installed pytest
    plugins that did not load; when it ran, also those found to provide what it lacked,
    with the line to add (a base that cannot run says that in its refusal)."""
    if cannot_run and advice is not None:
        return ""  # the refusal names the plugins found
    tests = base.tests
    said = ""
    if tests is not None and tests.plugins_off:
        errored = tests.errored_at_setup()
        if cannot_run or errored:
            where = f" ({len(errored)} test(s) errored at set-up on the base commit)"
            said = (
                "installed pytest plugins that did not load, since the harness turns plugin "
                f"autoload off: {', '.join(tests.plugins_off)}{where if errored else ''}; "
                "list those the tests need in [predicate] pytest_plugins"
            )
    if advice is not None:
        found = f"{advice.said()}; fix: {advice.fix()}"
        said = f"{said}; {found}" if said else found
    return said


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _fix(why: str, differs: bool) -> str:
    if why.startswith("exit 127"):
        return (
            "check the command's spelling, and that its program is installed on PATH (a "
            "sandboxed command sees the directories on PATH, not your home directory)"
        )
    if why.startswith("exit 126"):
        return "make the program executable, or run it through its interpreter"
    if why.startswith("exit 4"):
        return (
            "make the options pytest refused (its usage error above names them) ones it "
            "knows: fix the command or the configuration's addopts; an installed plugin's "
            "option needs the plugin listed in [predicate] pytest_plugins (autoload is off)"
        )
    if why.startswith(("exit 5", "pytest collected no tests")):
        return (
            "name tests that exist on the base commit; for a night that writes them, commit "
            "a first test file the predicate collects"
        )
    if differs:
        return (
            "commit what the tests need, or make the predicate generate it (a clean checkout "
            "holds only what is committed)"
        )
    return (
        "run the command on a clean clone of the repository and make it run there: the "
        "tests must import and collect from what is committed"
    )


def _run(
    plugins: list[str],
    policy: SandboxPolicy,
    command: str,
    where: Path,
    timeout_s: float,
    *,
    user_checkout: bool = False,
    complete: bool = False,
    places: Places | None = None,
) -> _Outcome:
    """``command`` in ``where`` as the night's first check runs it (sandboxed when the mode
    is on), with the pytest ``plugins`` of ``[predicate] pytest_plugins``; in the user's
    checkout, writing no bytecode and no pytest cache. ``places``: written as shown in its
    output, before the output is cut to its tail."""
    tests = runs_pytest(command)
    extra = {"PYTHONDONTWRITEBYTECODE": "1"} if user_checkout else {}
    confine: Confinement | None = policy.confinement(agent_worked=False)
    reporter = pytest_evidence(plugins, complete=complete) if tests else None
    with reporter or contextlib.nullcontext() as evidence:
        if evidence is not None and user_checkout:
            evidence.plugins = (*evidence.plugins, "no:cacheprovider")
        confine, env = check_placement(confine, [where], evidence, extra)
        result = run_command(
            command,
            cwd=where,
            timeout_s=timeout_s,
            env=env,
            confine=confine,
            pass_fds=(evidence.fd,) if evidence is not None else (),
            place=places,
        )
        return _Outcome(result, evidence.read() if evidence is not None else None)


@contextlib.contextmanager
def _export(repo: Path, commit: str) -> Iterator[Path]:
    """The files of ``commit`` in a private temporary directory, nothing else (no ``.git``,
    no ignored file)."""
    with tempfile.TemporaryDirectory(prefix="overnight-start-") as tmp:
        target = Path(tmp) / "checkout"
        target.mkdir()
        env = ws.git_env()
        env["GIT_INDEX_FILE"] = str(Path(tmp) / "index")
        for args in (["read-tree", commit], ["checkout-index", "-a", f"--prefix={target}/"]):
            done = subprocess.run(
                ["git", *ws.SAFE_GIT_OPTIONS, "-C", str(repo), *args],
                env=env,
                capture_output=True,
                stdin=subprocess.DEVNULL,
                timeout=ws.GIT_TIMEOUT_S,
                check=False,
            )
            if done.returncode != 0:
                said = done.stderr.decode("utf-8", "replace").strip()
                raise WorkspaceError(f"cannot export {commit[:12]} of {repo}: {said}")
        yield target


#: What a checkout may hold that no test run reads: tools' and editors' settings, git's own
#: files, build metadata that a clean checkout's tests do without.
_INERT_TOP = frozenset(
    {
        ".github",
        ".gitlab",
        ".circleci",
        ".gitignore",
        ".gitattributes",
        ".editorconfig",
        ".pre-commit-config.yaml",
        ".readthedocs.yaml",
        ".vscode",
        ".idea",
        "build",
        "dist",
    }
)


def _may_matter(extra: list[str]) -> bool:
    """Whether any of ``extra`` (files of the user's checkout its commit lacks) could change
    a test run's outcome."""
    for path in extra:
        top = path.strip("/").split("/", 1)[0]
        if top in _INERT_TOP or top.endswith(".egg-info"):
            continue
        return True
    return False


def _extra_files(repo: Path) -> list[str]:
    """What the user's checkout holds that its commit lacks (untracked or ignored), caches
    left out; an ignored directory is one entry."""
    done = subprocess.run(
        [
            "git",
            *ws.SAFE_GIT_OPTIONS,
            "-C",
            str(repo),
            "status",
            "--porcelain=v1",
            "-z",
            "--ignored=traditional",
            "--untracked-files=normal",
        ],
        env=ws.git_env(),
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=ws.GIT_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        return []
    out: list[str] = []
    for entry in done.stdout.split(b"\0"):
        status, path = entry[:2], entry[3:].decode("utf-8", "replace")
        if status not in (b"??", b"!!") or not path:
            continue
        parts = [p for p in path.split("/") if p]
        if any(p in _CACHES for p in parts) or path.endswith((".pyc", ".pyo")):
            continue
        out.append(path)
    return out


def _listed(paths: list[str], limit: int = 10) -> str:
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")

"""The checks a night passes before anything is written, in the order ``resolve``
(``overnight.night.resolve``) makes them: the repository and the spec's own consistency
(``check_spec_basics``); then, once the sandbox is built, the programs the night's tools need
(on PATH as the sandbox sees it) and the model's settings, credentials and targets
(``check_settings``); last, whether its model can be reached (``check_model_reach``).

Each failure is a ``ConfigError`` naming the field and the fix (``overnight run`` exits 64).
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

from overnight.config.problems import Problems
from overnight.config.spec import FIXES, Spec, check_model_settings, spec_import_path
from overnight.core.budget import PriceTable
from overnight.core.errors import ConfigError
from overnight.models.providers import sdk_client
from overnight.models.reach import check_reach
from overnight.models.seam import python_model
from overnight.night.compose import load_executor
from overnight.night.worktree import check_repository, git_common_dir
from overnight.sandbox.bwrap import SandboxUnavailable, sandbox_env, sandbox_programs
from overnight.seams import ModelClient, TaskExecutor
from overnight.store.rundir import overnight_home


def check_spec_basics(spec: Spec, *, model_given: bool = False) -> None:
    """The repository and the spec's own consistency, every problem at once (``SpecProblems``
    for several): what is checked before the sandbox is built (``overnight.night.resolve``).
    ``model_given``: the caller hands in its own model, whose settings are then not the
    spec's to check."""
    found = Problems()
    with found.checking():
        check_repository(spec.workspace_path())
    ids = [t.id for t in spec.tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        found.add(ConfigError("tasks", f"duplicate task ids {dupes}", "give every task its own id"))
    with found.checking():
        _check_needs(spec)
    if spec.effects.database is not None:
        db = spec.effects_path(Path("."))
        if db.is_relative_to(spec.workspace_path()):
            found.add(
                ConfigError(
                    "effects.database",
                    f"{db} is inside the workspace, where the agent's work lands",
                    "put the effects ledger outside the repository",
                )
            )
    if spec.budget.usd == 0 and spec.model is not None:
        found.add(
            ConfigError(
                "budget.usd",
                "a night with a [model] needs a money cap ([budget] usd, above 0)",
                FIXES["budget.usd"],
            )
        )
    if spec.model is not None and not model_given:
        with found.checking():
            check_model_settings(spec.model)
    found.raise_found()


def _check_needs(spec: Spec) -> None:
    """What the spec's tasks need of the rest of it: a model to plan, commands a planned
    task's verify may run, a model or an executor for agent tasks."""
    if not spec.tasks and spec.model is None:
        raise ConfigError(
            "model",
            "there are no [[tasks]], so a model must plan the queue, and no [model] is set",
            "add [[tasks]] entries, or a [model] table",
        )
    if not spec.tasks and not spec.tools.commands:
        raise ConfigError(
            "tools.commands",
            "the model plans this night, and each task it plans is checked by a verify "
            "command it writes, which must start with one of [tools] commands; none is listed",
            'list the programs a check may run, e.g. commands = ["pytest", "python3 -m pytest"]',
        )
    needs_executor = spec.may_run_agents()
    if needs_executor and spec.executor is None and spec.model is None:
        raise ConfigError(
            "model",
            "agent tasks (a brief, or tasks planned by the model) need a model for the "
            "built-in agent, or an [executor]",
            'add a [model] table, or [executor] target = "module:attr", or give every task '
            "a command",
        )
    cli = spec.executor
    if needs_executor and cli is not None and cli.is_cli and spec.model is None:
        raise ConfigError(
            "model",
            f"the {cli.kind} executor reaches its model through the harness's metering proxy, "
            "which books every call against [budget] through the night's [model]",
            'add a [model] table (provider = "anthropic" or "openai", name = the model), whose '
            "key stays with the harness",
        )


def check_settings(
    spec: Spec,
    *,
    model: ModelClient | None = None,
    executor: TaskExecutor | None = None,
    programs: bool = True,
) -> PriceTable:
    """What is checked once the sandbox is built: the programs, the model's settings,
    credentials and targets, the executor. A ``model`` or ``executor`` handed in by the
    caller replaces the spec's, whose targets and credentials are then not checked.
    ``programs``: also ``check_programs`` (``overnight check`` reports it on a line of its
    own). Returns the night's price table, built once here."""
    table: PriceTable | None = None
    if programs:
        check_programs(spec, executor=executor)
    mechanical = spec.agent.mechanical_model
    if mechanical is not None:
        try:
            table = spec.price_table()
            table.price(mechanical)
        except ConfigError as exc:
            raise ConfigError("agent.mechanical_model", exc.problem, exc.fix) from None
    if spec.model is not None and model is None:
        table = table or spec.price_table()
        table.price(spec.model.name)
    with spec_import_path(spec):
        if spec.model is not None and model is None:
            if spec.model.provider == "python" and spec.model.target is not None:
                python_model(spec.model.target)
            elif spec.model.provider not in ("python", "script"):
                sdk_client(spec.model)  # refuses missing credentials the SDK can see up front
        if spec.executor is not None and spec.executor.target is not None and executor is None:
            load_executor(spec.executor.target)
    if spec.executor is not None and spec.executor.is_cli and executor is None:
        from overnight.executors import check_cli

        check_cli(spec.executor, Path(spec.base_dir))
    return table or spec.price_table()


#: Words a shell runs itself: no program on PATH to look for.
SHELL_WORDS = frozenset(
    {"cd", "exit", "export", "set", "source", ".", "exec", "eval", "[", "[[", "!", "{", "("}
)


def first_word(command: str) -> str | None:
    """The word a shell command starts with, after any assignments."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:
        return None
    return next((w for w in words if not ("=" in w and not w.startswith("="))), None)


def program_of(command: str) -> str | None:
    """The program a shell command starts with (none for a path, or a word the shell runs
    itself)."""
    word = first_word(command)
    if word is None or word in SHELL_WORDS or "/" in word or not word[0].isalnum():
        return None
    return word


def command_path(spec: Spec) -> str:
    """The PATH a command of the night sees: the sandbox's (an allowlisted environment), which
    is also what an unsandboxed command is given."""
    return sandbox_env(spec.sandbox)["PATH"]


def tool_programs(
    spec: Spec, *, executor: TaskExecutor | None = None
) -> list[tuple[str, str, str, str]]:
    """The programs the night's tools need, each with the field that needs it, what for, and
    how to make it right: ripgrep for ``search_text`` (when the built-in agent works), and the
    program of each ``[tools] commands`` prefix (when an agent works: ``run_command``, and the
    verify of a planned task). bubblewrap is the sandbox's check (``check_sandbox``)."""
    if not spec.may_run_agents():
        return []
    out: list[tuple[str, str, str, str]] = []
    built_in_agent = executor is None and (spec.executor is None or spec.executor.kind == "agent")
    if built_in_agent and "search_text" in spec.tools.allow:
        out.append(
            (
                "rg",
                "tools.allow",
                "search_text runs ripgrep",
                "install it (Debian and Ubuntu: apt-get install "
                "ripgrep), or remove search_text from [tools] allow",
            )
        )
    for prefix in spec.tools.commands:
        program = program_of(prefix)
        if program is not None:
            out.append(
                (
                    program,
                    "tools.commands",
                    f"the command prefix {prefix!r} runs it",
                    f"install {program} (or put its directory on PATH), or remove {prefix!r} "
                    "from [tools] commands",
                )
            )
    return out


def check_programs(spec: Spec, *, executor: TaskExecutor | None = None) -> None:
    """Every program the night's tools need is on PATH as a command of the night sees it:
    a ``ConfigError`` naming the field, the program and how to install it otherwise (today's
    alternative: the model finds out at its first search, in the middle of the night)."""
    path = command_path(spec)
    for program, field, need, fix in tool_programs(spec, executor=executor):
        if shutil.which(program, path=path) is None:
            raise ConfigError(field, f"{program} is not on PATH ({need}; PATH={path})", fix)


def command_programs(spec: Spec) -> list[tuple[str, str, str]]:
    """The first word of each of the night's own commands (the goal predicate, its set-up,
    each ``[[tasks]]`` verify and command), with the field that holds it and the command."""
    p = spec.predicate
    found: list[tuple[str, str | None]] = [
        ("predicate.command", p.command),
        ("predicate.setup", p.setup),
    ]
    for t in spec.tasks:
        found += [(f"tasks.{t.id}.verify", t.verify), (f"tasks.{t.id}.command", t.command)]
    out: list[tuple[str, str, str]] = []
    for field, command in found:
        word = first_word(command) if command else None
        if word is None or word in SHELL_WORDS or not (word[0].isalnum() or "/" in word):
            continue
        out.append((word, field, str(command)))
    return out


def check_command_programs(spec: Spec, root: Path | None = None) -> None:
    """The program each of the night's own commands starts with (``command_programs``) is
    on PATH as a command of the night sees it, or, named by a path, in ``root`` (the copy of
    the repository the commands run in; a relative one is not looked for without it, nor
    when a set-up command may make it): a ``ConfigError`` naming the program and how to make
    it right otherwise."""
    path = command_path(spec)
    for word, field, command in command_programs(spec):
        if "/" not in word:
            if shutil.which(word, path=path) is None:
                raise ConfigError(
                    field,
                    f"{word} is not on PATH (`{command}` runs it; PATH={path})",
                    f"install {word}, or put the directory that holds it on PATH",
                )
            continue
        where = Path(word)
        if not where.is_absolute():
            if root is None or spec.predicate.setup is not None:
                continue
            where = root / where
        if not where.exists():
            raise ConfigError(
                field,
                f"{word} does not exist here (`{command}` runs it)",
                f"make {word} (or install what provides it) where the command runs",
            )


def check_sandbox_programs(spec: Spec) -> None:
    """bubblewrap and prlimit are installed when a command of the night must run sandboxed
    (``check_sandbox`` probes the sandbox itself, once the repository is there)."""
    if not spec.needs_sandbox():
        return
    try:
        sandbox_programs()
    except SandboxUnavailable as exc:
        raise ConfigError("sandbox", exc.problem, exc.fix) from None


def check_model_reach(spec: Spec, *, model: ModelClient | None = None) -> list[str]:
    """Whether the spec's model answers at its address and takes its key, asked with one
    request that costs nothing (``overnight.models.reach``): a ``ConfigError`` when it cannot
    be reached or refuses the key, else notes of any other answer for the night's trace. No
    check for a model no SDK serves (``python``), nor when the caller hands in its own
    ``model``."""
    if model is not None or spec.model is None:
        return []
    note = check_reach(spec.model)
    return [note] if note is not None else []


def sealed_places(spec: Spec, run_dir: Path | None = None) -> list[Path]:
    """What the sandbox never shows: the run directory, the workspace checkout and its git
    directory, ``$OVERNIGHT_HOME``, the effects ledger's directory."""

    repo = check_repository(spec.workspace_path())
    places = [repo, git_common_dir(repo), overnight_home()]
    if run_dir is not None:
        places.append(Path(run_dir).absolute())
    if spec.effects.database is not None:
        db = spec.effects_path(Path("."))
        places.append(db.parent if db.parent != Path(db.anchor) else db)
    return places

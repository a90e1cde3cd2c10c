"""The night's spec (``night.toml``): validated completely before anything is written.

Every field has a docstring; every validation failure becomes a ``ConfigError`` naming the
field and the fix, and the CLI exits 64.
"""

from __future__ import annotations

import re
import tomllib
from contextlib import AbstractContextManager
from difflib import get_close_matches
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from overnight.config.agent import AgentSpec
from overnight.config.alerts import AlertsSpec
from overnight.config.estimate import Workload
from overnight.config.fleet import FleetSpec
from overnight.config.gates import GateSpec, check_gates
from overnight.config.model_script import Script, load_script
from overnight.config.prices import price_for
from overnight.config.sandbox import SandboxSpec
from overnight.config.targets import import_roots
from overnight.config.telemetry import TelemetrySpec
from overnight.config.tools import BUILTIN_TOOLS, ToolsSpec
from overnight.core.budget import BudgetFractions, Price, PriceTable
from overnight.core.errors import ConfigError, SpecProblems
from overnight.core.globs import GlobError, compile_glob
from overnight.core.tasks import Task

#: Where model calls can go (see ``overnight.models.providers``).
PROVIDERS = ("python", "anthropic", "openai", "openai-compatible", "script")


#: Above these a setting is a typo, not a plan (and would overflow the arithmetic).
MAX_USD = 1_000_000.0
MAX_HOURS = 24.0 * 31
MAX_OUTPUT_TOKENS = 1_000_000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)


class BudgetSpec(_Strict):
    """``[budget]``: the night's limits (money, wall clock, steps, tokens) and the lines at
    which it is told, stops starting tasks, and stops spending."""

    usd: float = Field(default=0.0, ge=0, le=MAX_USD)
    """Hard cap in dollars. Never crossed: every model call's worst case is reserved first.
    Required (above 0) when the night has a model; a night of command tasks needs none."""
    hours: float = Field(default=8.0, gt=0, le=MAX_HOURS)
    """Wall-clock limit in hours, waits and tools included. Time while no process runs
    (between a crash and its resume) does not count."""
    steps: int | None = Field(default=None, gt=0, le=10**6)
    """Optional limit on task executions (each attempt, retries included)."""
    tokens: int | None = Field(default=None, gt=0, le=10**12)
    """Optional limit on tokens billed (input, cache reads and writes, output)."""
    notice_at: float = Field(default=0.70, gt=0, le=1)
    """From this share of the money cap, agent calls get a budget notice at the end of their
    messages."""
    finish_at: float = Field(default=0.90, gt=0, le=1)
    """From this share of the money cap, no new task starts; the one in flight finishes."""
    enforce_at: float = Field(default=0.92, gt=0, le=1)
    """Enforcement line for every budget; the rest is the wrap-up reserve for the summary."""

    def fractions(self) -> BudgetFractions:
        return BudgetFractions(self.notice_at, self.finish_at, self.enforce_at)


class PredicateSpec(_Strict):
    """``[predicate]``: the goal check the harness runs, and what protects it from the agent."""

    command: str = Field(min_length=1)
    """Shell command run by the harness on a clean checkout of the run's branch; exit 0 means
    the goal is met."""
    timeout_s: float = Field(default=600.0, gt=0)
    """Seconds before the predicate is killed and counted as not met."""
    setup: str | None = Field(default=None, min_length=1)
    """Shell command run in every clean checkout before anything is judged there (the base
    record, each verify and predicate run, the start check) and in the agent's worktree when
    the night starts and whenever it is written afresh: what a clean checkout needs before its
    tests can run (write a generated ``version.py``, build extensions in place). It runs in the
    sandbox like the checks, and can write only the checkout. Unset: nothing is run."""
    setup_timeout_s: float = Field(default=600.0, gt=0)
    """Seconds before the set-up command is killed (the check it prepares is then not met)."""
    pytest_plugins: list[str] = Field(default_factory=list)
    """Installed pytest plugins the predicate and the verifies need (``["xdist"]``): a check
    that runs pytest runs with plugin autoload off and loads these with ``-p``, besides the
    harness's own reporter."""
    protect: list[str] | None = None
    """Globs of paths the agent may not change (what judges the work). Unset: the usual test
    machinery (``**/tests/**``, ``test_*.py``, ``*_test.py``, ``**/conftest.py``, ``pytest.ini``,
    ``tox.ini``, ``setup.cfg``, ``pyproject.toml``, ``noxfile.py``, ...) plus every file and
    directory the predicate and the seed verify commands name. A night whose goal is to write
    tests sets its own list."""
    allow_automation: list[str] = Field(default_factory=list)
    """Globs of automation paths (CI workflows, git, shell, editor and agent configuration,
    commit and install hooks: ``overnight.core.automation``) an agent task may change, matched
    as written, case included (``[".github/workflows/**"]``). Each landed change to one is
    named on the report's first screen. Unset: a task that changes any of them is parked."""
    max_diff_lines: int | None = Field(default=None, gt=0)
    """The most lines (added plus deleted) an agent task's change may have: a larger change
    is parked, its size said. Unset: no limit."""
    allow_dependency_changes: bool = False
    """Whether an agent task may change the project's dependencies (requirements files, the
    dependency tables of ``pyproject.toml``, ``setup.cfg`` and ``package.json``, lockfiles
    such as ``poetry.lock``, ``uv.lock``, ``package-lock.json``). Unset: such a change is
    parked; allowed, each landed one is named in the result."""

    @field_validator("pytest_plugins")
    @classmethod
    def _plugin_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.:-]*", name):
                raise ConfigError(
                    "predicate.pytest_plugins",
                    f"{name!r} is not a pytest plugin name",
                    'name plugins as pytest -p takes them, e.g. ["xdist", "pytest_timeout"]',
                )
        return value

    @field_validator("protect")
    @classmethod
    def _globs(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        for pattern in value:
            try:
                compile_glob(pattern)
            except GlobError as exc:
                raise ConfigError(
                    "predicate.protect",
                    str(exc),
                    'write globs such as "tests/**" or "**/conftest.py"',
                ) from None
        return value

    @field_validator("allow_automation")
    @classmethod
    def _allowed_globs(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                compile_glob(pattern)
            except GlobError as exc:
                raise ConfigError(
                    "predicate.allow_automation",
                    str(exc),
                    'write globs such as ".github/workflows/**" or ".pre-commit-config.yaml"',
                ) from None
        return value


class ModelSpec(_Strict):
    """``[model]``: where the model calls go and how they are made. Optional when every task
    is a command task."""

    provider: str = "python"
    """Where calls go: ``python`` (a callable named by ``target``), ``script`` (answers read
    from the file ``script`` names, no key), ``anthropic`` (the Messages API), ``openai`` (the
    Responses API, or chat completions with ``api = "chat"``), or ``openai-compatible`` (an
    OpenAI-protocol server at ``base_url``: vLLM, Ollama, llama.cpp). API keys come from the
    environment (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``)."""
    target: str | None = None
    """For ``python`` only: ``module:attr`` of a callable taking a request and returning a
    response."""
    script: str | None = Field(default=None, min_length=1)
    """For ``script`` only: a TOML (or ``.json``) file of the model's answers, in order per
    purpose, relative to the spec's directory; read and checked when the spec is loaded."""
    name: str = Field(min_length=1)
    """The model name sent to the provider and priced by the ledger (``[prices.<name>]``, else
    the genai-prices data)."""
    max_tokens: int = Field(default=4096, gt=0, le=MAX_OUTPUT_TOKENS)
    """``max_tokens`` of the harness's own calls (plan, drift, replan)."""
    summary_max_tokens: int = Field(default=1024, gt=0, le=MAX_OUTPUT_TOKENS)
    """``max_tokens`` of the closing summary, paid from the wrap-up reserve."""
    base_url: str | None = None
    """The API's base URL. Required for ``openai-compatible`` (e.g.
    ``http://localhost:8000/v1``); otherwise None keeps the SDK's default and its environment
    variable (``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``)."""
    api: Literal["chat", "responses"] | None = None
    """For the OpenAI providers: ``responses`` or ``chat`` (chat completions). None: the
    Responses API for ``openai``, chat completions for ``openai-compatible``."""
    stream: bool = True
    """Stream responses (recommended: long calls do not hit idle-connection timeouts)."""
    timeout_s: float = Field(default=600.0, gt=0)
    """Seconds before one HTTP attempt is abandoned (and retried)."""
    max_attempts: int = Field(default=20, ge=1, le=1000)
    """Attempts per call (the first included) while the provider fails with retryable errors
    (429, 5xx, 529, timeouts, connection errors)."""
    outage_limit_s: float = Field(default=900.0, ge=0)
    """Seconds a provider may keep failing with retryable errors before the run ends
    ``dependency_unavailable`` (resumable). The waits count against the wall clock."""

    _script: Script | None = PrivateAttr(default=None)

    def read_script(self, base_dir: Path) -> None:
        """Read and check the ``script`` file (a ``ConfigError`` naming the turn and field)."""
        if self.script is None:
            raise ConfigError(
                "model.script",
                "the script provider needs a script file",
                'e.g. script = "turns.toml" (a file next to the spec)',
            )
        self._script = load_script(base_dir / self.script)

    def scripted_turns(self) -> Script:
        """The checked script of a ``script`` model (read when the spec was loaded)."""
        if self._script is None:
            raise ConfigError("model.script", "the script file was not read with the spec")
        return self._script


#: Who carries out a night's agent tasks (``[executor] kind``).
ExecutorKind = Literal["agent", "claude-code", "codex", "command", "python"]
#: The HTTP API a CLI agent speaks to its model, through the harness's metering proxy.
CliApi = Literal["anthropic", "openai-chat", "openai-responses"]


class ExecutorSpec(_Strict):
    """``[executor]``: who carries out the agent tasks (the built-in agent, a CLI agent behind
    the metering proxy, or your own Python executor)."""

    kind: ExecutorKind = "agent"
    """Who carries out agent tasks: ``agent`` (the built-in one), ``claude-code`` (Claude
    Code's ``claude -p``), ``codex`` (OpenAI's ``codex exec``), ``command`` (any CLI agent,
    ``command`` below) or ``python`` (a ``TaskExecutor`` named by ``target``). A spec with
    ``target`` and no ``kind`` means ``python``. Whatever the kind, the harness's verify and
    goal predicate judge the work."""
    target: str | None = None
    """For ``python`` only: ``module:attr`` of an object with ``execute(task, context)``."""
    path: str | None = Field(default=None, min_length=1)
    """For a CLI: its executable, relative to the spec's directory unless absolute (e.g.
    ``node_modules/.bin/claude``); None: found on ``PATH``."""
    model: str | None = Field(default=None, min_length=1)
    """For a CLI: the model it asks for, priced like ``[model] name`` (``[prices.NAME]``, else
    the genai-prices data). None: ``[model] name``."""
    max_turns: int = Field(default=40, gt=0, le=10_000)
    """For a CLI: its turns per task (model calls with tool use), where it takes a limit."""
    tools: list[str] | None = None
    """For a CLI: the tools it may use, in its own names (Claude Code: ``["Read", "Edit",
    "Bash"]``). None: the CLI's tools for reading, editing and running commands."""
    instructions: str = ""
    """For a CLI: extra instructions added to every task's prompt."""
    command: list[str] | None = None
    """For ``command`` only: the CLI's command line, one word per item. A word
    ``{prompt}`` is replaced by the task's prompt, ``{model}`` by the model; without
    ``{prompt}`` the prompt is written to its standard input."""
    api: CliApi | None = None
    """For ``command`` only: the API its model speaks through the proxy (``anthropic``,
    ``openai-chat``, ``openai-responses``); its base URL and token arrive in
    ``ANTHROPIC_BASE_URL``/``ANTHROPIC_API_KEY`` or ``OPENAI_BASE_URL``/``OPENAI_API_KEY``
    (and ``OVERNIGHT_MODEL_BASE_URL``/``OVERNIGHT_MODEL_TOKEN``)."""
    timeout_s: float | None = Field(default=None, gt=0)
    """For a CLI: seconds one task's run may take before its process group is ended. None:
    the task's ``timeout_s``."""
    task_usd: float | None = Field(default=None, gt=0, le=MAX_USD)
    """For a CLI: the most one attempt at a task may spend on model calls, held and booked;
    a request past it is refused unforwarded. None: the night's budget alone."""

    @model_validator(mode="before")
    @classmethod
    def _python_by_target(cls, data: Any) -> Any:
        if isinstance(data, dict) and "target" in data and "kind" not in data:
            return {**data, "kind": "python"}
        return data

    @model_validator(mode="after")
    def _fields_of_kind(self) -> ExecutorSpec:
        if self.kind == "python" and self.target is None:
            raise ValueError('kind = "python" needs target = "module:attr"')
        if self.kind != "python" and self.target is not None:
            raise ValueError('target is for kind = "python" only')
        if self.kind == "command" and not self.command:
            raise ValueError(
                'kind = "command" needs command = ["mini", "-t", "{prompt}", ...] (its '
                "command line) and api (the API its model speaks)"
            )
        if self.kind == "command" and self.api is None:
            raise ValueError(
                'kind = "command" needs api = "anthropic", "openai-chat" or "openai-responses"'
            )
        if self.kind != "command" and (self.command is not None or self.api is not None):
            raise ValueError('command and api are for kind = "command" only')
        return self

    @property
    def is_cli(self) -> bool:
        """A CLI agent: its model calls go through the metering proxy."""
        return self.kind in ("claude-code", "codex", "command")

    def cli_api(self) -> CliApi:
        """The API the CLI's model speaks."""
        if self.kind == "claude-code":
            return "anthropic"
        if self.kind == "codex":
            return "openai-responses"
        assert self.api is not None
        return self.api


class PriceSpec(_Strict):
    """``[prices.<model>]``: one model's rates in dollars per million tokens, over the
    genai-prices data."""

    input: float = Field(ge=0)
    """$ per million uncached input tokens."""
    output: float = Field(ge=0)
    """$ per million output tokens (thinking included)."""
    cache_read: float | None = Field(default=None, ge=0)
    """$ per million cache-read tokens; default 0.1 x input."""
    cache_write_5m: float | None = Field(default=None, ge=0)
    """$ per million 5-minute cache-write tokens; default 1.25 x input."""
    cache_write_1h: float | None = Field(default=None, ge=0)
    """$ per million 1-hour cache-write tokens; default 2 x input."""
    web_search: float | None = Field(default=None, ge=0)
    """$ per web search the provider runs for the model (a server tool, billed by the use:
    Anthropic and OpenAI charge $10 per 1,000, $0.01). Unset: a CLI's request that offers the
    provider's web search is refused, not forwarded."""
    web_fetch: float | None = Field(default=None, ge=0)
    """$ per web fetch the provider makes for the model (a server tool; Anthropic bills its
    fetched content as input tokens and no fee, so 0 prices it). Unset: refused."""
    multipliers: dict[str, float] = Field(default_factory=dict)
    """Factors on every rate for a request that asks to be served another way, keyed
    ``field=value``: ``"speed=fast"`` (Anthropic's fast mode), ``"service_tier=priority"``,
    ``"service_tier=flex"``, ``"inference_geo=us"``. A request asking for one not named here
    is refused, not forwarded (the proxy pins the service tier to the standard one)."""

    @field_validator("multipliers")
    @classmethod
    def _multiplier_keys(cls, value: dict[str, float]) -> dict[str, float]:
        for key, factor in value.items():
            name, eq, choice = key.partition("=")
            if not eq or name not in MULTIPLIER_FIELDS or not choice:
                raise ConfigError(
                    "prices.multipliers",
                    f"{key!r} is not a multiplier the harness knows",
                    "key each by field=value, the field one of "
                    + ", ".join(MULTIPLIER_FIELDS)
                    + ' (e.g. "service_tier=priority" = 1.8)',
                )
            if factor < 0:
                raise ConfigError(
                    "prices.multipliers", f"{key!r} = {factor} is negative", "use a factor >= 0"
                )
        return value

    def price(self) -> Price:
        base = Price.from_input_output(self.input, self.output)
        per_use = tuple(
            (name, fee)
            for name, fee in (("web_search", self.web_search), ("web_fetch", self.web_fetch))
            if fee is not None
        )
        return Price(
            self.input,
            self.output,
            base.cache_read if self.cache_read is None else self.cache_read,
            base.cache_write_5m if self.cache_write_5m is None else self.cache_write_5m,
            base.cache_write_1h if self.cache_write_1h is None else self.cache_write_1h,
            per_use=per_use,
            multipliers=tuple(sorted(self.multipliers.items())),
        )


#: The request fields a ``[prices.MODEL] multipliers`` key may name.
MULTIPLIER_FIELDS = ("speed", "service_tier", "inference_geo")


class EffectsSpec(_Strict):
    """``[effects]``: where the effects ledger lives."""

    database: str | None = None
    """The effects ledger (SQLite), relative to the spec's directory. Default: the run
    directory's ``effects.sqlite``. Runs that may deliver the same task twice must share one
    database: its task-key index is what refuses the second delivery."""


class RunSpec(_Strict):
    """``[run]``: how the lap goes (drift checks, retries, replans) and what a candidate may
    hold."""

    drift_every: int = Field(default=5, gt=0)
    """Tasks between drift checks."""
    no_progress_after: int = Field(default=5, gt=0)
    """Consecutive tasks that verify nothing before the run ends NO_PROGRESS."""
    retries: int = Field(default=2, ge=0, le=20)
    """Re-executions of a task whose verify says not done, before it is parked."""
    replan: bool = True
    """After an unmet predicate with tasks left, ask the model whether to add tasks."""
    exclude: list[str] = Field(default_factory=list)
    """Paths kept out of every candidate, in gitignore syntax, on top of the built-in
    excludes (caches and build products: ``__pycache__/``, ``*.py[cod]``, ``/build/``,
    ``*.egg-info/``, ...). A tracked file they match keeps its base version."""
    include: list[str] = Field(default_factory=list)
    """Paths admitted to candidates whatever the excludes and the repository's ignore rules
    say, in gitignore syntax (``include = ["/dist/"]``)."""
    max_file_mb: float = Field(default=10.0, gt=0)
    """Largest file a candidate may hold, in MiB: a task whose change holds a larger one is
    parked, and the file never enters the repository's object store."""


class TaskSpec(_Strict):
    """One ``[[tasks]]`` entry: a seed task, a shell ``command`` or a ``brief`` for the
    executor, with the ``verify`` the harness runs."""

    id: str = Field(min_length=1, max_length=120, pattern=r"^[A-Za-z0-9_.:-]+$")
    """Unique task id (letters, digits, ``_ . : -``)."""
    title: str = ""
    """A short human title for reports and commit messages."""
    command: str | None = None
    """Shell command run in the worktree (a command task)."""
    brief: str | None = None
    """Instructions for the executor (an agent task)."""
    verify: str
    """Read-only, idempotent shell check: exit 0 done, 1 not done, other partially applied."""
    value: float = 0.0
    """Higher runs first."""
    retries: int | None = Field(default=None, ge=0, le=20)
    """Overrides ``run.retries`` for this task."""
    timeout_s: float = Field(default=600.0, gt=0)
    """Seconds before the command (and its verify) is killed."""

    @model_validator(mode="after")
    def _one_body(self) -> TaskSpec:
        if (self.command is None) == (self.brief is None):
            raise ValueError("a task has exactly one of `command` (a shell command) or `brief`")
        return self


class Spec(_Strict):
    goal: str = Field(min_length=1)
    """The goal in plain words. Held by the harness; no tool can reach it."""
    workspace: str = "."
    """A git repository (relative to the spec file). The run works on its own branch."""
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    predicate: PredicateSpec
    model: ModelSpec | None = None
    executor: ExecutorSpec | None = None
    prices: dict[str, PriceSpec] = Field(default_factory=dict)
    run: RunSpec = Field(default_factory=RunSpec)
    agent: AgentSpec = Field(default_factory=AgentSpec)
    """How the built-in agent works an agent task (calls, caching, compaction, tiering)."""
    tools: ToolsSpec = Field(default_factory=ToolsSpec)
    """The tools the built-in agent may use, and the commands ``run_command`` may run."""
    effects: EffectsSpec = Field(default_factory=EffectsSpec)
    """Where external effects are written down before they are attempted."""
    sandbox: SandboxSpec = Field(default_factory=SandboxSpec)
    """When commands run in the OS sandbox (bubblewrap), and what it lets them do."""
    alerts: AlertsSpec = Field(default_factory=AlertsSpec)
    """Who is told when the night ends: what ``alert`` and ``page`` do."""
    telemetry: TelemetrySpec = Field(default_factory=TelemetrySpec)
    """Where the night is exported as OpenTelemetry spans (OTLP/HTTP), and whether they carry
    content."""
    estimate: Workload | None = None
    """The workload ``overnight estimate`` prices before the night runs (tasks, calls per
    task, call sizes, the levers' settings); a run does not read it."""
    tasks: list[TaskSpec] = Field(default_factory=list)
    fleet: FleetSpec = Field(default_factory=FleetSpec)
    """What a night run by a fleet worker shares with the fleet (its daily money cap)."""
    gates: list[GateSpec] = Field(default_factory=list)
    """``[[gates]]``: the repository's own checks (linter, formatter, type checker) a task's
    change must pass besides its verify, judged against the base commit's findings.
    ``overnight init`` writes the ones it finds configured. None: the verifies alone judge."""

    # Filled by ``load_spec``; not part of the file.
    base_dir: str = ""
    """Directory of the spec file (set when loaded)."""

    @model_validator(mode="after")
    def _gates(self) -> Spec:
        check_gates(self.gates)
        return self

    @model_validator(mode="after")
    def _bands(self) -> Spec:
        self.budget.fractions()  # raises ConfigError on inconsistent bands
        return self

    @model_validator(mode="after")
    def _script_read(self) -> Spec:
        model = self.model
        if model is None or model.provider != "script":
            return self
        model.read_script(Path(self.base_dir))
        if not self.tasks and not model.scripted_turns().plan:
            raise ConfigError(
                "model.script",
                f"{model.script}: the night has no [[tasks]], so the model plans it, and the "
                "script has no [[plan]] turn",
                "add a [[plan]] turn calling submit_plan, or [[tasks]] to the spec",
            )
        for n, turn in enumerate(model.scripted_turns().execute, start=1):
            for call in turn.tool_calls():
                if call.name in BUILTIN_TOOLS and call.name not in self.tools.allow:
                    raise ConfigError(
                        "model.script",
                        f"{model.script}: [[execute]] turn {n} calls `{call.name}`, which "
                        "[tools] allow does not give the agent",
                        f'add "{call.name}" to [tools] allow',
                    )
        return self

    def effects_path(self, run_dir: Path) -> Path:
        if self.effects.database is None:
            return run_dir / "effects.sqlite"
        return (Path(self.base_dir) / self.effects.database).resolve()

    def workspace_path(self) -> Path:
        return (Path(self.base_dir) / self.workspace).resolve()

    def may_run_agents(self) -> bool:
        """Whether an agent may work in this night: tasks with a brief, or a planned queue."""
        return not self.tasks or any(t.brief is not None for t in self.tasks)

    def needs_sandbox(self) -> bool:
        """Whether some command of this night must run sandboxed (see ``[sandbox] mode``)."""
        mode = self.sandbox.mode
        return mode == "on" or (mode == "auto" and self.may_run_agents())

    def price_table(self) -> PriceTable:
        """The spec's ``[prices.*]`` tables, plus a price from genai-prices for each model the
        spec sends calls to (``model.name``, ``agent.mechanical_model``) that has no table. A
        model priced by neither raises ``ConfigError``."""
        table = {k: v.price() for k, v in self.prices.items()}
        if self.model is not None:
            for name in (self.model.name, self.agent.mechanical_model):
                if name is not None and name not in table:
                    table[name] = price_for(name, self.model.provider, table)
        cli = self.executor
        if cli is not None and cli.is_cli and cli.model is not None and cli.model not in table:
            provider = "anthropic" if cli.cli_api() == "anthropic" else "openai"
            try:
                table[cli.model] = price_for(cli.model, provider, table)
            except ConfigError as exc:
                raise ConfigError("executor.model", exc.problem, exc.fix) from None
        return PriceTable(table)

    def seed_tasks(self) -> list[Task]:
        default_retries = self.run.retries
        return [
            Task(
                id=t.id,
                title=t.title,
                command=t.command,
                brief=t.brief,
                verify=t.verify,
                value=t.value,
                retries=default_retries if t.retries is None else t.retries,
                timeout_s=t.timeout_s,
                origin="spec",
            )
            for t in self.tasks
        ]


FIXES: dict[str, str] = {
    "goal": 'add goal = "what the night should achieve" at the top of the spec',
    "budget": "add a [budget] table with usd = ... (and hours = ...)",
    "budget.usd": f"set usd to the hard cap in dollars (at most {MAX_USD:_.0f}), e.g. usd = 28.0",
    "budget.hours": f"set hours to a positive number up to {MAX_HOURS:g}, e.g. hours = 8",
    "budget.steps": "set steps to a positive whole number, or leave it out",
    "budget.tokens": "set tokens to a positive whole number, or leave it out",
    "model.max_tokens": f"set max_tokens to at most {MAX_OUTPUT_TOKENS:_}, e.g. 4096",
    "model.summary_max_tokens": f"set summary_max_tokens to at most {MAX_OUTPUT_TOKENS:_}",
    "agent.max_tokens": f"set max_tokens to at most {MAX_OUTPUT_TOKENS:_}, e.g. 8192",
    "predicate": 'add [predicate] with command = "..." (exit 0 means the goal is met)',
    "predicate.command": 'e.g. command = "pytest -q"',
    "model.name": 'name the model to price, e.g. name = "claude-opus-5"',
    "model.script": 'e.g. script = "turns.toml" (a file next to the spec)',
    "tasks": "each [[tasks]] entry needs id, verify, and one of command or brief",
    "tasks.id": "use letters, digits and _ . : - only",
    "gates": 'each [[gates]] entry needs name and command; kind is "findings" or "format"',
    "predicate.max_diff_lines": "set max_diff_lines to a positive whole number, or leave it out",
    "estimate": "see [estimate] in the night.toml reference (docs/reference/night-toml.md)",
    "telemetry.otlp_endpoint": 'e.g. otlp_endpoint = "http://localhost:4318"',
    "telemetry": "see [telemetry] in the night.toml reference (docs/reference/night-toml.md)",
}


def _field_of(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for p in loc:
        if isinstance(p, int):
            parts[-1] = f"{parts[-1]}[{p}]" if parts else f"[{p}]"
        else:
            parts.append(p)
    return ".".join(parts) or "(spec)"


def _fix_for(field: str) -> str:
    key = field
    while key:
        plain = key.split("[")[0]
        if key in FIXES:
            return FIXES[key]
        if plain in FIXES:
            return FIXES[plain]
        key = key.rpartition(".")[0]
    return "see the night.toml reference (docs/reference/night-toml.md), or run overnight check"


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (itself, in a list, a dict's values, optional)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in reversed(get_args(annotation)):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _table_of(loc: tuple[int | str, ...]) -> tuple[str, list[str]]:
    """The table an unknown key at ``loc`` sits in (``[budget]``, ``[[tasks]]``, the top
    level) and the keys that table takes."""
    model: type[BaseModel] = Spec
    names: list[str] = []
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        inner = _model_in(field.annotation) if field is not None else None
        if inner is None:  # a free-form table (prices per model name): no list to offer
            names.append(part)
            continue
        model, names = inner, [*names, part]
    keys = [name for name, f in model.model_fields.items() if not f.exclude and name != "base_dir"]
    if not names:
        return "the top level of the spec", keys
    if len(loc) >= 2 and isinstance(loc[-2], int):
        return f"[[{'.'.join(names)}]]", keys
    return f"[{'.'.join(names)}]", keys


def _unknown_key(loc: tuple[int | str, ...]) -> tuple[str, str]:
    """The problem and the fix of a key the spec's table does not take: the nearest valid
    key of that very table when one is close, else the keys it takes."""
    key = str(loc[-1])
    table, keys = _table_of(loc)
    near = get_close_matches(key, keys, n=1, cutoff=0.6)
    listed = ", ".join(keys)
    if near:
        return (
            f"unknown field `{key}` in {table}",
            f"did you mean `{near[0]}`? ({table} takes: {listed})",
        )
    return f"unknown field `{key}` in {table}", f"{table} takes: {listed}"


def parse_spec(data: dict[str, Any], base_dir: Path) -> Spec:
    """Validate a spec mapping: a ``ConfigError`` for one problem, ``SpecProblems`` listing
    every problem (each with its field and fix) for several."""
    try:
        spec = Spec.model_validate({**data, "base_dir": str(base_dir)}, strict=True)
    except ValidationError as exc:
        problems: list[ConfigError] = []
        for err in exc.errors():
            field = _field_of(tuple(err["loc"]))
            if err["type"] == "extra_forbidden":
                problems.append(ConfigError(field, *_unknown_key(tuple(err["loc"]))))
                continue
            problems.append(ConfigError(field, err["msg"], _fix_for(field)))
        problems += _model_problems(data, {p.field for p in problems})
        if len(problems) == 1:
            raise problems[0] from None
        raise SpecProblems(problems) from None
    except ConfigError:
        raise
    except ValueError as exc:
        raise ConfigError("(spec)", str(exc)) from None
    return spec


def _model_problems(data: dict[str, Any], seen: set[str]) -> list[ConfigError]:
    """What ``check_model_settings`` says of a ``[model]`` table that is valid on its own, in
    a spec that is not: listed with the other problems rather than after they are fixed."""
    table = data.get("model")
    if not isinstance(table, dict) or any(f.startswith("model") for f in seen):
        return []
    try:
        model = ModelSpec.model_validate(table)
    except (ValidationError, ValueError):
        return []
    try:
        check_model_settings(model)
    except ConfigError as exc:
        return [exc]
    return []


def load_spec(path: Path) -> Spec:
    """Read, parse and check a spec file. Checks that need the machine (the workspace, the
    model target, prices) are done by ``check_spec``."""
    if not path.exists():
        raise ConfigError("spec", f"{path} does not exist", "pass the path of your night.toml")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("spec", f"cannot read {path}: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("spec", f"{path} is not valid TOML: {exc}") from None
    return parse_spec(data, path.resolve().parent)


ModelNeed = Literal["none", "required"]


def check_model_settings(model: ModelSpec) -> None:
    """The ``[model]`` fields each provider needs, and no field it would ignore."""
    if model.provider not in PROVIDERS:
        raise ConfigError(
            "model.provider",
            f"unknown provider {model.provider!r}",
            f"use one of {', '.join(PROVIDERS)}",
        )
    if model.script is not None and model.provider != "script":
        raise ConfigError(
            "model.script",
            f"script is only used by the script provider, not {model.provider!r}",
            'remove script, or set provider = "script"',
        )
    if model.provider == "python":
        if model.target is None:
            raise ConfigError("model.target", "the python provider needs a target", "module:attr")
        return
    if model.target is not None:
        raise ConfigError(
            "model.target",
            f"target is only used by the python provider, not {model.provider!r}",
            "remove target",
        )
    if model.provider == "script":
        for name in ("base_url", "api"):
            if getattr(model, name) is not None:
                raise ConfigError(
                    f"model.{name}", f"{name} is not used by the script provider", f"remove {name}"
                )
        return
    if model.provider == "openai-compatible" and not model.base_url:
        raise ConfigError(
            "model.base_url",
            "the openai-compatible provider needs the server's base_url",
            'e.g. base_url = "http://localhost:8000/v1"',
        )
    if model.api is not None and model.provider == "anthropic":
        raise ConfigError("model.api", "api applies to the OpenAI providers only", "remove api")


def spec_import_path(spec: Spec) -> AbstractContextManager[None]:
    """Within the block, user targets (``module:attr``) resolve from the spec's directory and
    the workspace; ``sys.path`` is left as it was."""
    return import_roots(spec.base_dir, spec.workspace_path())

"""One task run by a CLI agent: the common part of every CLI executor.

For each attempt the runner

* asks the night for a grant of its metering proxy (``ExecContext.model_access``): a one-time
  token the proxy admits for this task, revoked when the run ends, whatever its end;
* builds the prompt: the task's brief, its verify command, the night's goal, what an earlier
  attempt already did (not to be repeated), the spec's instructions;
* runs the CLI headless in the worktree, in the same sandbox as every command the model can
  shape (``ExecContext.confine``), behind the proxy's bridge: ``bridge.py`` listens on the
  sandbox's own loopback and carries each connection to the proxy's unix socket, bound into
  the sandbox (the only way out: the sandbox has no network). The CLI's base URL is the
  bridge's port, its API key the token; its home is the sandbox's private one (nothing of the
  user's: no credentials, settings or history), its telemetry and updates off. The CLI's
  installation is bound read-only, file by file, at its own paths;
* reads the CLI's JSON event lines while it runs, as ``cli_event`` trace events (turns, tool
  calls, its final result with its own success flag and ``cli_reported_cost_usd``, never
  trusted), and keeps its whole output as an artifact (``ExecContext.task_log``);
* ends it, with its process group and the sandbox's PID namespace, when the task's time is
  up, when the night must stop, or a few seconds after the proxy first refused one of its
  calls for the budget (a CLI that keeps going after a refusal spends nothing more, but holds
  the night up).

What comes back says how the run ended, never whether the work is done: the harness's verify
and goal predicate judge that. A CLI that crashed, hung or exited without changing the worktree
is a failed attempt with its reason. Whether the worktree changed is seen from its files' names
and metadata (caches and build products left out), never by running git outside the sandbox on
a tree the model wrote.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from overnight.config.spec import CliApi, ExecutorSpec
from overnight.core.candidate_rules import BUILTIN_EXCLUDES
from overnight.core.ignore import Rule, decide, parse_rules
from overnight.core.tasks import Task
from overnight.executors.cli_found import QUIET_ENV, CliFound
from overnight.executors.cli_stream import Reader, Said, reader_for, short
from overnight.process import (
    CommandResult,
    Confinement,
    WithAdditions,
    run_command,
    scrubbed_env,
)
from overnight.proxy import bridge
from overnight.sandbox.machine_view import SANDBOX_HOME
from overnight.seams import ExecContext, ExecResult, ModelAccess

#: Seconds a CLI may go on after the proxy first refused one of its calls.
REFUSAL_GRACE_S = 5.0

#: The longest prompt handed to a CLI (it travels as one argument, whose limit is 128 KiB).
MAX_PROMPT = 100_000

#: Environment variables of the harness never handed to an unconfined CLI (a sandboxed one
#: gets an allowlisted environment anyway): its own provider settings and a CLI's own
#: configuration directories.
_OWN_PREFIXES = ("ANTHROPIC_", "OPENAI_", "CLAUDE_", "CODEX_", "OVERNIGHT_", "XDG_")

_GENERATED: list[Rule] = parse_rules(BUILTIN_EXCLUDES)

PREAMBLE = """\
You are working unattended on one task in the git repository in the current directory.
Nobody will answer questions. Make the smallest change that does the task, and nothing else.
Do not commit and do not run git: the harness takes your changes from the working tree.
You do not decide whether the task is done: the harness runs its check after you stop.
When you are done, or cannot get further, stop and reply with a short summary of what you
changed and what is left."""


class NoModelAccess(RuntimeError):
    """A CLI executor was given a context without the metering proxy (a composition error)."""


def build_prompt(task: Task, *, goal: str = "", earlier: str = "", instructions: str = "") -> str:
    """What a CLI is asked to do for ``task``."""
    parts = [PREAMBLE, "", f"Task {task.id}: {task.title}".rstrip(": "), "", task.brief or ""]
    parts += ["", f"The harness will check the task with this command: {task.verify}"]
    if goal:
        parts += ["", f"The goal of the whole night (checked by the harness): {goal}"]
    if instructions:
        parts += ["", instructions]
    text = "\n".join(parts).strip()
    if earlier:
        head = "An earlier attempt at this task already did the following; do not repeat it:"
        room = MAX_PROMPT - len(text) - len(head) - 4
        if room > 200:
            shown = earlier if len(earlier) <= room else "…" + earlier[-(room - 1) :]
            text = f"{text}\n\n{head}\n{shown}"
    return text[:MAX_PROMPT]


@dataclass(frozen=True)
class Endpoint:
    """Where a CLI finds its model, as it sees it."""

    root: str
    """``http://127.0.0.1:PORT``: the bridge (the Anthropic SDKs' base URL)."""
    token: str
    model: str
    home: str
    """Its home directory."""

    @property
    def openai(self) -> str:
        """The OpenAI SDKs' base URL."""
        return f"{self.root}/v1"

    def base_url(self, api: str) -> str:
        return self.root if api == "anthropic" else self.openai


@dataclass(frozen=True)
class Launch:
    """How one CLI is started: its command line and what it adds to the environment."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    stdin: bytes | None = None


class CliExecutor:
    """A ``TaskExecutor`` that hands each agent task to a CLI agent (subclasses say how it is
    started and how its output reads)."""

    kind = "command"

    def __init__(self, spec: ExecutorSpec, found: CliFound, *, goal: str = "") -> None:
        self.spec = spec
        self.found = found
        self.goal = goal

    @property
    def api(self) -> CliApi:
        return self.spec.cli_api()

    def model_of(self, ctx: ExecContext, access: ModelAccess) -> str:
        return self.spec.model or access.model or ctx.model

    def launch(self, prompt: str, endpoint: Endpoint) -> Launch:
        raise NotImplementedError

    def reader(self) -> Reader:
        return reader_for(self.kind)

    def execute(self, task: Task, ctx: ExecContext) -> ExecResult:
        if ctx.model_access is None:
            raise NoModelAccess(
                f"the {self.kind} executor needs the metering proxy, and the night has none"
            )
        limit = min(self.spec.timeout_s or task.timeout_s, ctx.seconds_left())
        if limit <= 0:
            return ExecResult("limit_reached", f"no time left to start {self.kind}")
        signal = ctx.stop_requested()
        if signal is not None:
            return ExecResult("gave_up", f"stop requested ({signal}) before {self.kind} started")
        access = ctx.model_access(self.api)
        try:
            return _Run(self, task, ctx, access, limit).run()
        finally:
            access.revoke()


class _Run:
    """One attempt: started, watched, ended, judged for what it did (not for its work)."""

    def __init__(
        self,
        executor: CliExecutor,
        task: Task,
        ctx: ExecContext,
        access: ModelAccess,
        limit: float,
    ) -> None:
        self.executor = executor
        self.task = task
        self.ctx = ctx
        self.access = access
        self.limit = limit
        self.kind = executor.kind
        self.reader = executor.reader()
        name = f"{task.id}.{ctx.attempt}.{self.kind}.log"
        self.log = ctx.task_log or ctx.artifacts / name
        self.refused_at: float | None = None
        self.stopped_for = ""

    def run(self) -> ExecResult:
        ctx = self.ctx
        prompt = build_prompt(
            self.task,
            goal=self.executor.goal,
            earlier=ctx.earlier,
            instructions=self.executor.spec.instructions,
        )
        confine = ctx.confine()
        with _home(confine is not None) as home:
            endpoint = Endpoint(
                root=f"http://127.0.0.1:{free_port()}",
                token=self.access.token,
                model=self.executor.model_of(ctx, self.access),
                home=home,
            )
            launch = self.executor.launch(prompt, endpoint)
            argv = [
                sys.executable,
                "-I",
                "-S",
                str(_bridge_file()),
                "--listen",
                endpoint.root.removeprefix("http://"),
                "--socket",
                str(self.access.socket),
                "--",
                *launch.argv,
            ]
            env = {**self._env(endpoint, confine), **launch.env}
            ctx.note(
                "cli_event",
                {
                    "cli": self.kind,
                    "event": "start",
                    "program": str(self.executor.found.program),
                    "version": self.executor.found.version,
                    "model": endpoint.model,
                    "sandboxed": confine is not None,
                    "timeout_s": round(self.limit, 3),
                    "log": str(self.log),
                },
            )
            before = snapshot(ctx.workdir)
            tail = _Tail(self.log, self.reader, self._note)
            try:
                ran = self._run(argv, env, launch.stdin, confine, tail)
            finally:
                tail.pump()
                tail.close()
            changed = changes(before, snapshot(ctx.workdir))
        return self._outcome(ran, changed)

    # -- running ------------------------------------------------------------------------

    def _env(self, endpoint: Endpoint, confine: Confinement | None) -> dict[str, str]:
        home = endpoint.home
        return {
            "HOME": home,
            "XDG_CONFIG_HOME": f"{home}/.config",
            "XDG_CACHE_HOME": f"{home}/.cache",
            "XDG_DATA_HOME": f"{home}/.local/share",
            "XDG_STATE_HOME": f"{home}/.local/state",
            "OVERNIGHT_MODEL_BASE_URL": endpoint.base_url(self.executor.api),
            "OVERNIGHT_MODEL_TOKEN": endpoint.token,
            "OVERNIGHT_MODEL": endpoint.model,
            **QUIET_ENV,
            **self._path(confine),
        }

    def _path(self, confine: Confinement | None) -> dict[str, str]:
        dirs = [str(d) for d in self.executor.found.path_dirs]
        if not dirs:
            return {}
        base = (confine.env if confine is not None else os.environ).get("PATH", os.defpath)
        return {"PATH": os.pathsep.join([*dirs, base])}

    def _run(
        self,
        argv: list[str],
        env: dict[str, str],
        stdin: bytes | None,
        confine: Confinement | None,
        tail: _Tail,
    ) -> CommandResult:
        def should_stop() -> str | None:
            tail.pump()
            signal = self.ctx.stop_requested()
            if signal is not None:
                self.stopped_for = f"stop requested ({signal})"
                return signal
            if self.access.refused() is not None:
                now = time.monotonic()
                if self.refused_at is None:
                    self.refused_at = now
                elif now - self.refused_at >= REFUSAL_GRACE_S:
                    self.stopped_for = "refused"
                    return "refused"
            return None

        if confine is not None:
            files = (_bridge_file(), self.access.socket, *self.executor.found.files)
            return run_command(
                argv,
                cwd=self.ctx.workdir,
                timeout_s=self.limit,
                confine=WithAdditions(confine, env, tuple(files)),
                should_stop=should_stop,
                log_path=self.log,
                stdin=stdin,
            )
        base = {k: v for k, v in scrubbed_env().items() if not k.startswith(_OWN_PREFIXES)}
        return run_command(
            argv,
            cwd=self.ctx.workdir,
            timeout_s=self.limit,
            env={**base, **env},
            should_stop=should_stop,
            log_path=self.log,
            stdin=stdin,
        )

    def _note(self, fields: dict[str, Any]) -> None:
        self.ctx.note("cli_event", {"cli": self.kind, **fields})

    # -- the end ------------------------------------------------------------------------

    def _outcome(self, ran: CommandResult, changed: list[str]) -> ExecResult:
        said = self.reader.said
        refused = self.access.refused()
        calls = self.access.calls()
        if refused is not None:
            status, why = "limit_reached", f"the metering proxy refused a model call: {refused}"
            if self.stopped_for == "refused":
                why += f"; {self.kind} went on, and was stopped {REFUSAL_GRACE_S:.0f} s later"
        elif self.stopped_for.startswith("stop requested"):
            status, why = "gave_up", self.stopped_for
        elif ran.timed_out:
            status = "gave_up"
            why = f"ran past its time ({self.limit:.0f} s); its process group was ended"
        elif ran.exit_code != 0:
            status = "limit_reached" if said.hit_max_turns else "gave_up"
            why = f"{self.kind} exited with code {ran.exit_code}"
            if said.hit_max_turns:
                why += f" at its max_turns ({self.executor.spec.max_turns})"
            else:
                why += f": {_last_lines(ran.output)}"
        elif not changed:
            status, why = "gave_up", f"{self.kind} exited without changes"
        else:
            status, why = "finished", f"{self.kind} exited 0 having changed {len(changed)} path(s)"
        self._note(
            {
                "event": "end",
                "status": status,
                "exit_code": ran.exit_code,
                "timed_out": ran.timed_out,
                "seconds": round(ran.seconds, 3),
                "calls": calls,
                "changed": changed[:20],
                "cli_success": said.success,
                "cli_reported_cost_usd": said.cost_usd,
                "harness_usd": self.access.booked_usd(),
                "log": str(self.log),
            }
        )
        final = self.reader.final().strip()
        booked = self.access.booked_usd()
        parts = [
            f"{why}; {calls} model call(s) through the proxy, booked ${booked:.4f}.",
            _own_account(said),
        ]
        if final:
            parts.append(f"It said: {final[:600]}")
        return ExecResult(
            status,  # type: ignore[arg-type]
            " ".join(p for p in parts if p),
            artifacts=[str(self.log)],
            lessons=_lessons(final),
        )


def _own_account(said: Said) -> str:
    """What the CLI said of itself, marked as such."""
    parts: list[str] = []
    if said.success is not None:
        parts.append("success" if said.success else f"failure ({said.detail or 'no detail'})")
    if said.turns:
        parts.append(f"{said.turns} turn(s)")
    if said.tool_calls:
        parts.append(f"{said.tool_calls} tool call(s)")
    if said.cost_usd is not None:
        parts.append(f"its own cost figure ${said.cost_usd:.4f}")
    if not parts:
        return ""
    return f"By its own account (not the harness's): {', '.join(parts)}."


def _lessons(final: str) -> list[str]:
    from overnight.agent.lessons import extract_lessons

    return extract_lessons(final)


def _last_lines(output: str, lines: int = 8, limit: int = 600) -> str:
    kept = [line for line in output.splitlines() if line.strip()][-lines:]
    return short(" | ".join(kept), limit) if kept else "no output"


def _bridge_file() -> Path:
    return Path(os.path.realpath(bridge.__file__))


def free_port() -> int:
    """A TCP port of 127.0.0.1 free at this moment (inside the sandbox, whose network is its
    own, every port is)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def _home(confined: bool) -> Iterator[str]:
    """The CLI's home: the sandbox's private one, or (unsandboxed) a directory made for this
    run and removed after it."""
    if confined:
        yield SANDBOX_HOME
        return
    home = tempfile.mkdtemp(prefix="overnight-cli-home-")
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


class _Tail:
    """Follows the CLI's log as it is written, handing each whole line to the reader."""

    def __init__(self, path: Path, reader: Reader, note: Callable[[dict[str, Any]], None]) -> None:
        self.path = path
        self.reader = reader
        self.note = note
        self.handle: IO[bytes] | None = None
        self.pending = b""
        self.skipping = False

    def pump(self) -> None:
        if self.handle is None:
            try:
                self.handle = open(self.path, "rb")  # noqa: SIM115 (closed by close())
            except OSError:
                return
        while True:
            chunk = self.handle.read(1 << 16)
            if not chunk:
                return
            self._feed(chunk)

    def _feed(self, chunk: bytes) -> None:
        data = self.pending + chunk
        lines = data.split(b"\n")
        self.pending = lines.pop()
        for raw in lines:
            if self.skipping:
                self.skipping = False
                continue
            self._line(raw)
        if len(self.pending) > (4 << 20):
            self.pending = b""
            self.skipping = True

    def _line(self, raw: bytes) -> None:
        for fields in self.reader.line(raw.decode("utf-8", "replace")):
            self.note(fields)

    def close(self) -> None:
        if self.pending and not self.skipping:
            self._line(self.pending)
        self.pending = b""
        if self.handle is not None:
            self.handle.close()
            self.handle = None


# -- has the worktree changed? ----------------------------------------------------------------

_Entry = tuple[str, int, int, int, str]


def snapshot(root: Path) -> dict[str, _Entry]:
    """Every entry of the worktree but its ``.git`` and the generated files (caches, build
    products): kind, size, modification time, mode, and a link's target. Names and metadata
    only; nothing is read, nothing followed."""
    out: dict[str, _Entry] = {}

    def walk(directory: Path, rel: str) -> None:
        try:
            entries = list(os.scandir(directory))
        except OSError:
            return
        for entry in entries:
            path = f"{rel}{entry.name}"
            if not rel and entry.name == ".git":
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            is_dir = stat.S_ISDIR(st.st_mode)
            rule = decide(_GENERATED, path, is_dir)
            if rule is not None and not rule.negated:
                continue
            target = ""
            if stat.S_ISLNK(st.st_mode):
                with contextlib.suppress(OSError):
                    target = os.readlink(entry.path)
            kind = "d" if is_dir else "l" if target else "f"
            size = 0 if is_dir else st.st_size
            out[path] = (kind, size, 0 if is_dir else st.st_mtime_ns, st.st_mode & 0o777, target)
            if is_dir:
                walk(Path(entry.path), f"{path}/")

    walk(root, "")
    return out


def changes(before: Mapping[str, _Entry], after: Mapping[str, _Entry]) -> list[str]:
    """The paths added, removed or changed between two snapshots, sorted."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


__all__ = [
    "MAX_PROMPT",
    "PREAMBLE",
    "REFUSAL_GRACE_S",
    "CliExecutor",
    "Endpoint",
    "Launch",
    "NoModelAccess",
    "build_prompt",
    "changes",
    "free_port",
    "snapshot",
]

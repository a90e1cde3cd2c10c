"""The CLI agents pinned in ``agents/package-lock.json`` (``scripts/setup --dev`` installs them
with ``npm ci``), and a place to run one: a worktree of a real repository with a small bug, the
real sandbox, the metering proxy on a unix socket in front of a scripted upstream.

A test that needs a CLI skips when it is not installed, except under CI=true, where its
absence is a failure (CI runs ``scripts/setup --dev``).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from overnight.config.sandbox import SandboxSpec
from overnight.config.spec import ExecutorSpec
from overnight.core.tasks import Task
from overnight.executors import CliFound, check_cli
from overnight.proxy.server import MeteringProxy, Upstream, Upstreams
from overnight.sandbox import Sandbox, build_sandbox
from overnight.seams import ExecContext, ModelAccess
from overnight.testing.meters import RecordingMeter
from overnight.testing.upstream import Received, ScriptedUpstream
from tests.helpers.nights import git, make_repo
from tests.helpers.sandbox import require_bwrap

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ROOT / "agents"
BIN = AGENTS / "node_modules" / ".bin"

#: The key the scripted upstream accepts: the harness's, which no CLI may ever see.
UPSTREAM_KEY = "sk-ant-api03-harness-only-7d41c0ffee"


def pinned(package: str) -> str:
    """The version of ``package`` that ``agents/package.json`` pins."""
    data = json.loads((AGENTS / "package.json").read_text())
    return str(data["dependencies"][package])


def cli_path(program: str) -> Path:
    """``agents/node_modules/.bin/PROGRAM``, or a skip (a failure under CI) saying how to
    install it."""
    path = BIN / program
    if path.exists():
        return path
    why = f"{program} is not installed in agents/ (scripts/setup --dev, or: cd agents && npm ci)"
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


def mini_swe_agent() -> Path:
    """The virtual environment ``scripts/setup --dev`` installs mini-swe-agent in, or a skip
    (a failure under CI) saying how to install it."""
    venv = AGENTS / "mini-swe-agent"
    if (venv / "bin" / "mini").exists():
        return venv
    why = (
        "mini-swe-agent is not installed in agents/mini-swe-agent (scripts/setup --dev, or: "
        "python3 -m venv agents/mini-swe-agent && agents/mini-swe-agent/bin/pip install "
        "-r agents/mini-swe-agent.txt)"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


def find(kind: str, **spec: Any) -> tuple[ExecutorSpec, CliFound]:
    """The spec of a ``kind`` executor running the pinned CLI, and what preflight found."""
    program = {"claude-code": "claude", "codex": "codex"}[kind]
    executor = ExecutorSpec.model_validate({"kind": kind, "path": str(cli_path(program)), **spec})
    return executor, check_cli(executor, ROOT)


BUGGY = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}


@dataclass
class Place:
    """A repository, a worktree of it in a run directory (both hidden from the sandbox but
    the worktree itself), a secret file outside it, and the sandbox."""

    root: Path
    repo: Path
    run: Path
    worktree: Path
    secret_file: Path
    sandbox: Sandbox
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def cli_events(self, event: str | None = None) -> list[dict[str, Any]]:
        return [
            fields
            for kind, fields in self.events
            if kind == "cli_event" and (event is None or fields.get("event") == event)
        ]


def make_place(root: Path, readable: tuple[Path, ...] = ()) -> Place:
    """The place, its sandbox also showing ``readable`` (as ``[sandbox] readable`` does)."""
    require_bwrap()
    repo = make_repo(root / "repo", BUGGY)
    run = root / "run"
    run.mkdir()
    worktree = run / "worktree"
    git(repo, "worktree", "add", "-q", "-b", "night", str(worktree))
    secret_file = root / "elsewhere" / "credentials"
    secret_file.parent.mkdir()
    secret_file.write_text(f"api_key = {UPSTREAM_KEY}\n")
    sealed = [run, repo, secret_file.parent]
    sandbox = build_sandbox(SandboxSpec(), sealed=sealed, readable=readable)
    return Place(root, repo, run, worktree, secret_file, sandbox)


@dataclass
class Proxy:
    """The metering proxy on a unix socket, as the night starts it, in front of ``upstream``;
    ``grant`` admits one token with its own meter."""

    upstream: ScriptedUpstream
    server: MeteringProxy
    socket: Path
    meters: dict[str, RecordingMeter] = field(default_factory=dict)
    revoked: list[str] = field(default_factory=list)

    def grant(self, meter: RecordingMeter, model: str = "claude-test-model") -> ModelAccess:
        token = "ovn-" + secrets.token_urlsafe(24)
        self.meters[token] = meter
        self.server.admit(token, meter)

        def revoke() -> None:
            self.revoked.append(token)
            self.server.revoke(token)

        return ModelAccess(
            socket=self.socket,
            token=token,
            api="",
            model=model,
            revoke=revoke,
            refused=lambda: meter.refuse if meter.refused else None,
            calls=lambda: len(meter.records),
        )


@contextlib.contextmanager
def proxy_for(script: Callable[[Received], Any] | list[Any]) -> Iterator[Proxy]:
    """A scripted upstream (taking only the harness's key) behind the metering proxy, whose
    socket lives in a directory of its own as the night makes it (0711, the socket 0666)."""
    with ScriptedUpstream(script, key=UPSTREAM_KEY) as upstream:
        where = Path(tempfile.mkdtemp(prefix="overnight-proxy-test-"))
        os.chmod(where, 0o711)
        sock = where / "model.sock"
        upstreams = Upstreams(
            anthropic=Upstream(base_url=upstream.url, key=UPSTREAM_KEY),
            openai=Upstream(base_url=upstream.openai_url, key=UPSTREAM_KEY),
        )
        server = MeteringProxy(upstreams, socket_path=sock)
        try:
            server.start()
            os.chmod(sock, 0o666)
            yield Proxy(upstream, server, sock)
        finally:
            server.close()
            shutil.rmtree(where, ignore_errors=True)


def context(
    place: Place,
    access: ModelAccess | None,
    *,
    sandboxed: bool = True,
    earlier: str = "",
    stop: Callable[[], str | None] = lambda: None,
    seconds_left: float = float("inf"),
) -> ExecContext:
    """What the night hands an executor for one attempt, pointed at ``place``."""

    def no_model(_request: Any) -> Any:
        raise AssertionError("a CLI executor never calls the model itself")

    artifacts = place.run / "artifacts"
    return ExecContext(
        workdir=place.worktree,
        artifacts=artifacts,
        model="claude-test-model",
        attempt=1,
        call_model=no_model,
        stop_requested=stop,
        budget_band=lambda: "normal",
        seconds_left=lambda: seconds_left,
        note=lambda kind, fields: place.events.append((kind, dict(fields))),
        earlier=earlier,
        confine=(lambda: place.sandbox) if sandboxed else (lambda: None),
        model_access=None if access is None else (lambda _api: access),
        task_log=artifacts / "t1.1.agent.log",
    )


TASK = Task(
    id="t1",
    title="fix add",
    brief="calc.add subtracts instead of adding. Fix it.",
    verify="python3 -m pytest -q test_calc.py",
    timeout_s=120,
)


def request_text(request: Received) -> str:
    """Everything a request carries, as one text (to look for what must or must not be in
    it)."""
    return request.raw.decode("utf-8", "replace")


def tool_results(request: Received) -> list[str]:
    """The tool results an Anthropic Messages request sends back, as text."""
    out: list[str] = []
    for message in request.body.get("messages", []) if isinstance(request.body, dict) else []:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block.get("content")
                if isinstance(inner, list):
                    out.append(
                        "".join(str(b.get("text", "")) for b in inner if isinstance(b, dict))
                    )
                else:
                    out.append(str(inner))
    return out

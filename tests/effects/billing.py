"""The billing example in tests: its workspace as a real git repository, its service as a
real process on 127.0.0.1, its night driven through the CLI."""

from __future__ import annotations

import contextlib
import json
import select
import shutil
import subprocess
import sys
import tomllib
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import overnight
from overnight.effects.store import SqliteEffectStore
from overnight.seams import EffectRow
from tests.helpers.kills import marked_env
from tests.helpers.nights import git
from tests.helpers.toml import dumps

EXAMPLE = Path(overnight.__file__).resolve().parent / "examples" / "refunds"
SERVICE = EXAMPLE / "service.py"
ORDER, TICKET, CUSTOMER = "4471", "88231", "dana.whitfield@example.com"
ALL_TASKS = [
    "verify_charge",
    "issue_refund",
    "notify_customer",
    "write_ticket_note",
    "close_ticket",
]


def make_workspace(
    base: Path,
    edit: Callable[[dict[str, Any]], None] | None = None,
    files: dict[str, str] | None = None,
) -> Path:
    """Copy the example into ``base/workspace`` as a fresh git repository; ``edit`` may change
    the parsed night.toml, ``files`` adds files before the first commit."""
    workspace = base / "workspace"
    shutil.copytree(EXAMPLE, workspace, ignore=shutil.ignore_patterns("__pycache__"))
    if edit is not None:
        spec = tomllib.loads((workspace / "night.toml").read_text())
        edit(spec)
        (workspace / "night.toml").write_text(dumps(spec))
    for rel, text in (files or {}).items():
        (workspace / rel).write_text(text)
    git(workspace, "init", "-q", "-b", "main")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "billing example")
    return workspace


class Service:
    """``service.py`` as a process of its own, in a process group of its own (a test's kill of the
    night never reaches it)."""

    def __init__(self, state: Path, *, latency_ms: str = "0", seed: int | None = None) -> None:
        args = [sys.executable, str(SERVICE), "--port", "0", "--state", str(state)]
        args += ["--latency-ms", latency_ms]
        if seed is not None:
            args += ["--seed", str(seed)]
        self.state_path = state
        self.proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 15.0)
        line = self.proc.stdout.readline().decode().strip() if ready else ""
        if not line.startswith("http://127.0.0.1:"):
            self.stop()
            raise AssertionError(f"the billing service did not start (said {line!r})")
        self.url = line

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            return json.loads(response.read())

    def state(self) -> dict[str, Any]:
        data: dict[str, Any] = self.get("/state")
        return data

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers; always reaped."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@contextlib.contextmanager
def running_service(state: Path, **kwargs: Any) -> Iterator[Service]:
    service = Service(state, **kwargs)
    try:
        yield service
    finally:
        service.stop()


def posts(state: dict[str, Any], path: str) -> list[dict[str, Any]]:
    """The POST requests the service answered at ``path`` (replays of a key included)."""
    return [r for r in state["requests"] if r["method"] == "POST" and r["path"] == path]


def night_env(url: str, extra_path: Path | None = None) -> tuple[dict[str, str], str]:
    """The CLI's environment (with a kill marker) pointing the tools at the service."""
    env, mark = marked_env(extra_path)
    env["BILLING_URL"] = url
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env, mark


def effect_rows(db: Path) -> list[EffectRow]:
    if not db.exists():
        return []
    store = SqliteEffectStore(db)
    try:
        return store.all()
    finally:
        store.close()


def result_of(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "result.json").read_text())
    return data

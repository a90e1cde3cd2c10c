"""The demo night: a bundled example copied into a fresh repository and its spec, ready to
run with its scripted model. ``overnight demo`` (``overnight.cli.demo``) runs and shows it;
``overnight replay`` sets up the same workspace to replay a recording of it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from overnight.config.spec import load_spec
from overnight.core.errors import ConfigError
from overnight.demo_upstream import play
from overnight.night.resolve import ResolvedNight, resolve
from overnight.process import scrubbed_env
from overnight.testing.upstream import ScriptedUpstream

EXAMPLE = "textstats"
EXAMPLES = ("textstats", "migrations")


def prepare_example(target: Path, name: str = EXAMPLE) -> Path:
    """Copy a bundled example into ``target/workspace`` as a fresh git repository."""
    source = resources.files("overnight.examples").joinpath(name)
    workspace = target / "workspace"
    with resources.as_file(source) as src:
        shutil.copytree(src, workspace, ignore=shutil.ignore_patterns("__pycache__"))
    env = scrubbed_env()
    git = ["git", "-C", str(workspace)]
    ident = ["-c", "user.name=overnight demo", "-c", "user.email=demo@localhost"]
    for cmd in (
        [*git, "init", "-q", "-b", "main"],
        [*git, "add", "-A"],
        [*git, *ident, "commit", "-q", "-m", "example workspace"],
    ):
        subprocess.run(cmd, check=True, env=env, capture_output=True)
    return workspace


#: Who may carry out the demo's agent tasks: overnight's own agent, or a CLI agent installed
#: on this machine (played by ``overnight.demo_upstream``).
DEMO_EXECUTORS = ("agent", "claude-code", "codex")
#: The credential the demo's scripted upstream takes (not a key of any provider).
DEMO_KEY = "sk-overnight-demo-not-a-key"


@dataclass
class DemoNight:
    """A demo night set up: where it is, its resolved spec, and the scripted upstream that
    plays its model for a CLI agent (None for overnight's own agent)."""

    base: Path
    workspace: Path
    night: ResolvedNight
    upstream: ScriptedUpstream | None = None
    saved_env: dict[str, str | None] = field(default_factory=dict)
    spec_name: str = "night.toml"
    """The example's spec this night runs."""

    def close(self) -> None:
        """The upstream stops and the environment is as it was (idempotent)."""
        _release(self.upstream, self.saved_env)
        self.upstream, self.saved_env = None, {}


def _release(upstream: ScriptedUpstream | None, saved_env: dict[str, str | None]) -> None:
    if upstream is not None:
        upstream.close()
    for name, value in saved_env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def start_demo(where: Path | None, example: str = EXAMPLE, executor: str = "agent") -> DemoNight:
    """Set up a demo night in ``where`` (None: a new temporary directory): the example's
    workspace, said on stderr to be run by a scripted model, and its spec resolved once (the
    run goes in the base directory's ``run``). With ``executor`` a CLI agent (``claude-code``),
    the installed CLI carries out the agent tasks, through the harness's metering proxy and
    sandbox, against a scripted upstream on 127.0.0.1 that plays the model."""
    if executor not in DEMO_EXECUTORS:
        raise ConfigError(
            "--executor", f"no demo with {executor!r}", f"use one of {DEMO_EXECUTORS}"
        )
    if executor != "agent" and example != EXAMPLE:
        raise ConfigError("--example", f"the {executor} demo runs the {EXAMPLE} example only")
    base = where or Path(tempfile.mkdtemp(prefix="overnight-demo-"))
    taken = [p.name for p in (base / "workspace", base / "run") if p.exists()]
    if taken:
        raise ConfigError(
            "--dir",
            f"{base} already holds a demo ({' and '.join(taken)})",
            "pass a new or empty directory, or leave --dir out for a temporary one",
        )
    base.mkdir(parents=True, exist_ok=True)
    workspace = prepare_example(base, example)
    if executor == "agent":
        print(
            "overnight demo: the model in this night is SCRIPTED (a fake that replays a fixed "
            "plan and tool calls, with realistic token counts and prompt caching); no API key "
            "is used and no money leaves your account: the spend the night reports is what its "
            "calls would have cost at the model's prices.\n"
            f"workspace: {workspace}",
            file=sys.stderr,
        )
        spec = load_spec(workspace / "night.toml")
        return DemoNight(base, workspace, resolve(spec, base / "run"))
    return _cli_demo(base, workspace, executor)


def _cli_demo(base: Path, workspace: Path, executor: str) -> DemoNight:
    upstream = ScriptedUpstream(play, key=DEMO_KEY).start()
    # The harness's own key and address of the provider, which its model client and its
    # metering proxy read: neither ever enters the sandbox.
    own = {
        "ANTHROPIC_API_KEY": DEMO_KEY,
        "ANTHROPIC_BASE_URL": upstream.url,
        "OPENAI_API_KEY": DEMO_KEY,
        "OPENAI_BASE_URL": upstream.openai_url,
    }
    saved = {name: os.environ.get(name) for name in own}
    os.environ.update(own)
    try:
        spec = load_spec(workspace / f"night.{executor}.toml")
        if spec.model is None:
            raise ConfigError("model", f"night.{executor}.toml names no [model]")
        url = upstream.url if spec.model.provider == "anthropic" else upstream.openai_url
        model = spec.model.model_copy(update={"base_url": url})
        spec = spec.model_copy(update={"model": model})
        print(
            f"overnight demo: the agent tasks are carried out by {executor}, installed on this "
            "machine, in the sandbox; its model calls go through the harness's metering proxy "
            f"to a SCRIPTED model on {upstream.url} that answers with the example's fixes. No "
            "API key is used and no money leaves your account: the spend the night reports is "
            "what its calls would have cost at the model's prices.\n"
            f"workspace: {workspace}",
            file=sys.stderr,
        )
        night = resolve(spec, base / "run")
    except BaseException:
        _release(upstream, saved)
        raise
    return DemoNight(base, workspace, night, upstream, saved, f"night.{executor}.toml")

"""The demo night: a bundled example copied into a fresh repository and its spec, ready to
run with its scripted model. ``overnight demo`` (``overnight.cli.demo``) runs and shows it;
``overnight replay`` sets up the same workspace to replay a recording of it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path

from overnight.config.spec import load_spec
from overnight.core.errors import ConfigError
from overnight.night.resolve import ResolvedNight, resolve
from overnight.process import scrubbed_env

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


def start_demo(where: Path | None, example: str = EXAMPLE) -> tuple[Path, Path, ResolvedNight]:
    """Set up a demo night in ``where`` (None: a new temporary directory): the example's
    workspace, said on stderr to be run by a scripted model, and its spec resolved once (the
    run goes in the base directory's ``run``). Returns the base directory, the workspace and
    the resolved night."""
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
    print(
        "overnight demo: the model in this night is SCRIPTED (a fake that replays a fixed "
        "plan and tool calls, with realistic token counts and prompt caching); no API key is "
        "used and no money leaves your account: the spend the night reports is what its calls "
        "would have cost at the model's prices.\n"
        f"workspace: {workspace}",
        file=sys.stderr,
    )
    spec = load_spec(workspace / "night.toml")
    return base, workspace, resolve(spec, base / "run")

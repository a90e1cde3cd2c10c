"""Finding a CLI agent before the night: its executable, its version, and the files of its
installation the sandbox must show it.

``check_cli`` runs at preflight, before anything is written or spent: a CLI that is missing,
does not answer ``--version``, or answers a version outside the range these executors were
built against is a ``ConfigError`` (exit 64) that says how to install one that fits.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from overnight.config.spec import ExecutorSpec
from overnight.core.errors import ConfigError
from overnight.process import scrubbed_env

#: How long ``--version`` may take.
VERSION_TIMEOUT_S = 20.0

#: Most files of one installation bound into the sandbox (a CLI made of more is refused: its
#: files are bound one by one, never as a directory).
MAX_INSTALL_FILES = 4000


@dataclass(frozen=True)
class Supported:
    """What an executor kind runs, and which of its versions it was built against."""

    program: str
    """The executable's name on ``PATH``."""
    package: str
    """Its npm package."""
    pinned: str
    """The version this project installs and tests (``agents/package.json``)."""
    low: tuple[int, int, int]
    """The oldest version supported (included)."""
    high: tuple[int, int, int]
    """The first version not supported."""

    @property
    def install(self) -> str:
        return (
            f"npm install {self.package}@{self.pinned} and set [executor] path = "
            f'"node_modules/.bin/{self.program}" (relative to the spec), or put {self.program} '
            f"on PATH; supported: {_dotted(self.low)} up to, not including, {_dotted(self.high)}"
        )


SUPPORTED: dict[str, Supported] = {
    "claude-code": Supported(
        program="claude",
        package="@anthropic-ai/claude-code",
        pinned="2.1.332",
        low=(2, 0, 0),
        high=(3, 0, 0),
    ),
    "codex": Supported(
        program="codex",
        package="@openai/codex",
        pinned="0.171.0",
        low=(0, 120, 0),
        high=(1, 0, 0),
    ),
}


@dataclass(frozen=True)
class CliFound:
    """A CLI agent found at preflight."""

    kind: str
    path: Path
    """The executable as the spec (or ``PATH``) names it, absolute."""
    program: Path
    """What runs: its real path, or for Codex CLI the native binary its launcher would run."""
    version: str
    """As ``--version`` says it; empty for ``kind = "command"`` (any CLI)."""
    files: tuple[Path, ...]
    """The regular files of its installation, bound read-only into the sandbox at their real
    paths (a package may lie in a place the sandbox hides, such as a home directory)."""
    path_dirs: tuple[Path, ...] = ()
    """Directories of its installation put first on its ``PATH`` (the tools it ships)."""


def check_cli(spec: ExecutorSpec, base_dir: Path) -> CliFound:
    """The CLI ``spec`` names, found and checked; ``ConfigError`` when it is missing or
    its version is not supported."""
    if spec.kind == "command":
        return _check_command(spec, base_dir)
    supported = SUPPORTED.get(spec.kind)
    if supported is None:
        raise ValueError(f"kind {spec.kind!r} is not a CLI agent")
    field = "executor.path"
    path = _locate(spec.path or supported.program, base_dir, explicit=spec.path is not None)
    if path is None:
        where = (
            f"{_resolved(spec.path, base_dir)} does not exist or is not executable"
            if spec.path is not None
            else f"{supported.program} is not on PATH"
        )
        raise ConfigError(field, where, f"how to install: {supported.install}")
    real = Path(os.path.realpath(path))
    program, files, path_dirs = (
        _codex_install(real) if spec.kind == "codex" else _claude_install(real)
    )
    said = _version_output(program, field, supported)
    version = _version(said)
    if version is None:
        raise ConfigError(
            field,
            f"{path} --version said {said[:200]!r}, which names no version",
            f"how to install: {supported.install}",
        )
    if not supported.low <= version < supported.high:
        raise ConfigError(
            field,
            f"{path} is version {_dotted(version)}, which overnight does not support",
            f"how to install: {supported.install}",
        )
    return CliFound(
        kind=spec.kind,
        path=path,
        program=program,
        version=_dotted(version),
        files=files,
        path_dirs=path_dirs,
    )


def _check_command(spec: ExecutorSpec, base_dir: Path) -> CliFound:
    assert spec.command
    name = spec.path or spec.command[0]
    field = "executor.path" if spec.path is not None else "executor.command"
    explicit = spec.path is not None or "/" in name
    path = _locate(name, base_dir, explicit=explicit)
    if path is None:
        raise ConfigError(
            field,
            f"{_resolved(name, base_dir)} does not exist or is not executable"
            if explicit
            else f"{name} is not on PATH",
            "install the CLI, or name its executable (an absolute path, or one relative to "
            "the spec's directory); mini-swe-agent: pip install mini-swe-agent (in a virtual "
            'environment), then api = "openai-chat" and command = ["env", '
            '"LITELLM_LOCAL_MODEL_COST_MAP=True", "MSWEA_COST_TRACKING=ignore_errors", '
            '"MSWEA_CONFIGURED=true", "mini", "--yolo", "--exit-immediately", "--cost-limit", '
            '"0", "--model", "openai/{model}", "--task", "{prompt}"]',
        )
    real = Path(os.path.realpath(path))
    return CliFound(kind="command", path=path, program=real, version="", files=(real,))


def _locate(name: str, base_dir: Path, *, explicit: bool) -> Path | None:
    """``name`` as an executable: a path (relative to ``base_dir``) when ``explicit`` or
    when it has a slash, else found on ``PATH``."""
    if explicit or "/" in name:
        candidate = _resolved(name, base_dir)
    else:
        found = shutil.which(name)
        if found is None:
            return None
        candidate = Path(os.path.abspath(found))
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    return None


def _resolved(name: str, base_dir: Path) -> Path:
    """``name`` as a path: absolute, or relative to ``base_dir``."""
    path = Path(os.path.expanduser(name))
    return Path(os.path.abspath(path if path.is_absolute() else base_dir / path))


def _version_output(program: Path, field: str, supported: Supported) -> str:
    """What ``program --version`` prints, run unconfined with a scrubbed environment and a
    throwaway home (nothing of the user's is read or written)."""
    with tempfile.TemporaryDirectory(prefix="overnight-cli-version-") as home:
        env = {
            **scrubbed_env(),
            "HOME": home,
            "XDG_CONFIG_HOME": home,
            "CODEX_HOME": home,
            "CLAUDE_CONFIG_DIR": home,
            **QUIET_ENV,
        }
        try:
            done = subprocess.run(
                [str(program), "--version"],
                env=env,
                cwd=home,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=VERSION_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ConfigError(
                field,
                f"{program} --version did not answer within {VERSION_TIMEOUT_S:.0f} s",
                f"how to install: {supported.install}",
            ) from None
        except OSError as exc:
            raise ConfigError(
                field, f"{program} cannot be started: {exc}", f"how to install: {supported.install}"
            ) from None
    said = (done.stdout + done.stderr).decode("utf-8", "replace").strip()
    if done.returncode != 0:
        raise ConfigError(
            field,
            f"{program} --version exited {done.returncode}: {said[-300:]!r}",
            f"how to install: {supported.install}",
        )
    return said


#: Telemetry, error reports, update checks and other traffic of their own off, for every
#: CLI run (the sandbox has no network anyway; unconfined, this is what keeps them quiet).
QUIET_ENV: dict[str, str] = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DO_NOT_TRACK": "1",
    "NO_UPDATE_NOTIFIER": "1",
    "NO_COLOR": "1",
}

_VERSION = re.compile(r"(?<![\d.])(\d+)\.(\d+)\.(\d+)")


def _version(text: str) -> tuple[int, int, int] | None:
    match = _VERSION.search(text)
    if match is None:
        return None
    return int(match[1]), int(match[2]), int(match[3])


def _dotted(version: tuple[int, int, int]) -> str:
    return ".".join(str(part) for part in version)


def _is_native(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return False


def _package_root(real: Path) -> Path | None:
    """The npm package ``real`` belongs to: the nearest directory above it with a
    ``package.json``, inside a ``node_modules``."""
    for parent in real.parents:
        if (parent / "package.json").is_file() and "node_modules" in parent.parts:
            return parent
        if parent.name == "node_modules":
            return None
    return None


def _install_files(real: Path) -> tuple[Path, ...]:
    """The files a CLI at ``real`` runs from: itself when it is a native binary, else every
    regular file of its npm package."""
    if _is_native(real):
        return (real,)
    root = _package_root(real)
    if root is None:
        return (real,)
    return _regular_files(root)


def _regular_files(root: Path) -> tuple[Path, ...]:
    files = list(_walk_files(root))
    if len(files) > MAX_INSTALL_FILES:
        raise ConfigError(
            "executor.path",
            f"{root} holds {len(files)} files, more than the {MAX_INSTALL_FILES} the sandbox "
            "binds one by one",
            "install the CLI's native build, or an npm package of its own (npm install in an "
            "empty directory)",
        )
    return tuple(files)


def _walk_files(root: Path) -> Iterator[Path]:
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                yield Path(os.path.realpath(path))


def _claude_install(real: Path) -> tuple[Path, tuple[Path, ...], tuple[Path, ...]]:
    """Claude Code's npm package puts its native binary in place of ``bin/claude.exe`` when
    its install script runs; without it (``--ignore-scripts``), the binary of its platform
    package runs the same. Older versions are a node script: its package's files."""
    root = None if _is_native(real) else _package_root(real)
    if root is not None:
        for name in _claude_platform_packages():
            binary = root.parent / name / "claude"
            if _is_native(binary) and os.access(binary, os.X_OK):
                binary = Path(os.path.realpath(binary))
                return binary, (binary,), ()
    return real, _install_files(real), ()


def _claude_platform_packages() -> list[str]:
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower()
    )
    if arch is None:
        return []
    return [f"claude-code-linux-{arch}", f"claude-code-linux-{arch}-musl"]


_CODEX_TRIPLES = {
    "x86_64": "x86_64-unknown-linux-musl",
    "amd64": "x86_64-unknown-linux-musl",
    "aarch64": "aarch64-unknown-linux-musl",
    "arm64": "aarch64-unknown-linux-musl",
}
_CODEX_PLATFORM_PACKAGES = {
    "x86_64-unknown-linux-musl": "codex-linux-x64",
    "aarch64-unknown-linux-musl": "codex-linux-arm64",
}


def _codex_install(real: Path) -> tuple[Path, tuple[Path, ...], tuple[Path, ...]]:
    """Codex CLI's npm launcher (a node script) only finds and runs a native binary from a
    platform package: run that binary directly, with the files of its platform directory."""
    if _is_native(real):
        return real, (real,), ()
    root = _package_root(real)
    triple = _CODEX_TRIPLES.get(platform.machine().lower())
    if root is None or triple is None:
        raise ConfigError(
            "executor.path",
            f"{real} is neither Codex CLI's native binary nor its npm package on a platform "
            "it ships for (Linux x86_64 or arm64)",
            f"how to install: {SUPPORTED['codex'].install}",
        )
    scope = root.parent
    candidates = [scope / _CODEX_PLATFORM_PACKAGES[triple] / "vendor", root / "vendor"]
    for vendor in candidates:
        for binary in (vendor / triple / "bin" / "codex", vendor / triple / "codex" / "codex"):
            if binary.is_file() and os.access(binary, os.X_OK):
                platform_dir = vendor / triple
                tools = platform_dir / "codex-path"
                return (
                    Path(os.path.realpath(binary)),
                    _regular_files(platform_dir),
                    (Path(os.path.realpath(tools)),) if tools.is_dir() else (),
                )
    raise ConfigError(
        "executor.path",
        f"{real} is Codex CLI's launcher, but its native binary for {triple} is not "
        f"installed (looked in {', '.join(str(c) for c in candidates)})",
        f"reinstall without --omit=optional; how to install: {SUPPORTED['codex'].install}",
    )


__all__ = ["QUIET_ENV", "SUPPORTED", "CliFound", "Supported", "check_cli"]

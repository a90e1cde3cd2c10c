"""Which commands of a night run in the sandbox (``[sandbox] mode``), and the places the
sandbox hides for one run."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from overnight.config.sandbox import SandboxMode, SandboxSpec
from overnight.core.errors import ConfigError, RunError
from overnight.sandbox.bwrap import Sandbox, SandboxUnavailable, build_sandbox, probe


class SandboxFailed(RunError):
    """A command had to run sandboxed and the sandbox could not be built."""

    cause = "workspace_error"


@dataclass
class Counted:
    """A sandbox that tells its policy each time it confines a command."""

    sandbox: Sandbox
    on_use: Callable[[], None]

    @property
    def env(self) -> Mapping[str, str]:
        return self.sandbox.env

    def command(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        info_fd: int | None = None,
        files: Sequence[Path] = (),
    ) -> list[str]:
        self.on_use()
        return self.sandbox.command(argv, cwd=cwd, info_fd=info_fd, files=files)

    def release(self, cwd: Path) -> None:
        self.sandbox.release(cwd)


@dataclass
class SandboxPolicy:
    """Decides, command by command, whether it runs confined.

    ``auto``: a tool's command and a command a model wrote always do; any other command does
    once an agent has worked in the worktree (``agent_worked``). ``on``: every command.
    ``off``: none.
    """

    mode: SandboxMode
    sandbox: Sandbox | None
    """None when the mode is off, or when bubblewrap is missing and the night cannot need it."""
    record: Callable[[bool], None] = field(default=lambda _sandboxed: None)
    """Told of every command decided: sandboxed (True) or run as written (False)."""

    def confinement(
        self, *, agent_worked: bool, model_written: bool = False, tool: bool = False
    ) -> Counted | None:
        needed = self.mode == "on" or (
            self.mode == "auto" and (agent_worked or model_written or tool)
        )
        if not needed:
            self.record(False)
            return None
        if self.sandbox is None:
            raise SandboxFailed(
                "a command has to run in the sandbox and bubblewrap is not available"
            )
        return Counted(self.sandbox, self._used)

    def _used(self) -> None:
        self.record(True)

    def close(self) -> None:
        """The night is over: its sandbox's uid goes back to the machine's range, for another
        night to take (idempotent)."""
        if self.sandbox is not None:
            self.sandbox.close()


def resolve_paths(spec: SandboxSpec, base_dir: Path) -> tuple[list[Path], list[Path]]:
    """The spec's ``writable`` and ``readable`` paths, absolute."""

    def absolute(p: str) -> Path:
        path = Path(os.path.expanduser(p))
        return path if path.is_absolute() else (base_dir / path)

    return [absolute(p) for p in spec.writable], [absolute(p) for p in spec.readable]


def check_paths(
    spec: SandboxSpec, base_dir: Path, sealed: Iterable[Path], home: Path | None = None
) -> None:
    """Refuse ``writable`` and ``readable`` paths that are missing, or that would bring back a
    place the sandbox hides."""
    writable, readable = resolve_paths(spec, base_dir)
    real_sealed = [Path(os.path.realpath(p)) for p in sealed]
    home_real = Path(os.path.realpath(home if home is not None else Path.home()))
    for name, paths in (("sandbox.writable", writable), ("sandbox.readable", readable)):
        for path in paths:
            if not path.exists():
                raise ConfigError(
                    name, f"{path} does not exist", "create it first, or remove it from the list"
                )
            real = Path(os.path.realpath(path))
            if real == Path("/"):
                raise ConfigError(name, "/ is the whole machine", "name a directory of its own")
            for hidden in real_sealed:
                if hidden == real or hidden.is_relative_to(real) or real.is_relative_to(hidden):
                    raise ConfigError(
                        name,
                        f"{path} would expose {hidden}, which the sandbox hides (the run "
                        "directory, the workspace checkout and its git directory, the effects "
                        "ledger, $OVERNIGHT_HOME)",
                        "name a directory outside those places",
                    )
            if name == "sandbox.writable" and (home_real == real or home_real.is_relative_to(real)):
                raise ConfigError(
                    name,
                    f"{path} holds your home directory",
                    "name a directory of its own, not one that contains $HOME",
                )


def make_sandbox(
    spec: SandboxSpec, base_dir: Path, sealed: Iterable[Path], *, required: bool
) -> Sandbox | None:
    """The run's sandbox. ``required``: bubblewrap must work (probed), else ConfigError naming
    the fix; otherwise a missing bubblewrap gives None."""
    if spec.mode == "off":
        return None
    writable, readable = resolve_paths(spec, base_dir)
    sandbox: Sandbox | None = None
    try:
        sandbox = build_sandbox(spec, sealed=sealed, writable=writable, readable=readable)
        if required:
            probe(sandbox)
    except SandboxUnavailable as exc:
        if sandbox is not None:
            sandbox.close()
        if not required:
            return None
        raise ConfigError("sandbox", exc.problem, exc.fix) from None
    return sandbox

"""The ``[sandbox]`` table: when commands run confined, and what the confinement allows."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from overnight.core.errors import ConfigError
from overnight.secrecy import is_secret_name

SandboxMode = Literal["auto", "on", "off"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HOST = re.compile(
    r"^(?=.{1,253}$)([A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*"
    r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.?$"
)

#: Set by the sandbox itself; a spec cannot pass the harness's own values of these.
OWN_VARIABLES = frozenset({"PATH", "HOME", "TMPDIR"})


class SandboxSpec(BaseModel):
    """The ``[sandbox]`` table."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)

    mode: SandboxMode = "auto"
    """``auto``: sandbox ``run_command``, every command a model wrote, and every command
    (task, verify, predicate) that runs once an agent task has worked in the run's worktree;
    the user's own commands in a worktree no agent has touched run as written. ``on``: every
    command of the night. ``off``: none (recorded in result.json and shown at the top of the
    report as an unsandboxed night)."""
    network: bool = False
    """Give sandboxed commands the machine's network. Default: a network namespace of their
    own with loopback only."""
    hosts: list[str] = Field(default_factory=list)
    """Hosts the model provider may reach for sandboxed work: a CLI agent's request that has
    the provider search or fetch the web is forwarded only when it limits the provider to
    domains named here (``allowed_domains``), or when ``network = true``; each is named in the
    trace. A URL the provider would fetch as a document or image is refused whatever this
    says: its size, and so its cost, cannot be known before it is sent."""
    writable: list[str] = Field(default_factory=list)
    """Paths (relative to the spec's directory) sandboxed commands may write besides the
    worktree and their private /tmp. They may not hold the run directory, the workspace or
    your home directory. A root harness lends them to the sandbox's unprivileged uid while a
    command runs (chowned to it, and back to their owners after)."""
    readable: list[str] = Field(default_factory=list)
    """Paths sandboxed commands may read besides what the sandbox shows of the machine (the
    system directories, the parts of /etc programs read, the toolchains on ``PATH``), even
    inside a hidden place such as your home directory: e.g. a toolchain that ``PATH`` does
    not lead to (``~/.rustup``, ``/opt/sdk``)."""
    env: list[str] = Field(default_factory=list)
    """Names of environment variables passed to sandboxed commands besides PATH, HOME (a
    private directory), LANG, LC_*, TZ, TERM and TMPDIR. Secret-looking names are refused."""
    address_space_mb: int = Field(default=8192, ge=0)
    """Address-space limit of each sandboxed process, in MiB (0: no limit)."""
    processes: int = Field(default=4096, ge=0)
    """Process limit (RLIMIT_NPROC), binding per night. The kernel counts it per uid and does
    not apply it to root: a root harness gives each night's sandbox an unprivileged uid of its
    own, held machine-wide while the night runs (one of 1024, or the range
    ``OVERNIGHT_SANDBOX_UIDS`` names), so one night's fork bomb cannot take the processes
    another night needs; only when every uid is held do sandboxes share one, and the limit
    with it. A harness that is not root runs its sandbox as its own uid, so the limit counts
    that user's other processes too. ``result.json`` says which held
    (``sandbox.process_limit``). 0: no limit."""
    file_size_mb: int = Field(default=4096, ge=0)
    """Largest file a sandboxed process may write, in MiB (0: no limit)."""
    bytecode: bool = False
    """Let sandboxed Python write bytecode caches. Default: ``PYTHONDONTWRITEBYTECODE=1``, so
    the agent's test runs leave no ``__pycache__`` behind."""
    cpu_seconds: int = Field(default=3600, ge=0)
    """CPU seconds each sandboxed process may use (0: no limit); wall time is bounded by the
    command's own timeout."""

    @field_validator("hosts")
    @classmethod
    def _host_names(cls, value: list[str]) -> list[str]:
        for host in value:
            if not _HOST.match(host):
                raise ConfigError(
                    "sandbox.hosts",
                    f"{host!r} is not a host name",
                    'name hosts alone, without a scheme or path, e.g. hosts = ["docs.python.org"]',
                )
        return [h.lower().rstrip(".") for h in value]

    @field_validator("env")
    @classmethod
    def _plain_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _ENV_NAME.match(name):
                raise ConfigError(
                    "sandbox.env",
                    f"{name!r} is not an environment variable name",
                    'list names only, e.g. env = ["BILLING_URL"]',
                )
            if is_secret_name(name):
                raise ConfigError(
                    "sandbox.env",
                    f"{name!r} looks like a secret, and secrets never reach a command the "
                    "model can influence",
                    "remove it; give the command what it needs through a file or a non-secret "
                    "variable",
                )
            if name in OWN_VARIABLES:
                raise ConfigError(
                    "sandbox.env",
                    f"{name} is set by the sandbox itself",
                    "remove it from sandbox.env",
                )
        return list(dict.fromkeys(value))

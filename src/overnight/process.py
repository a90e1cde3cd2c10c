"""Running commands (command tasks, verify commands, the goal predicate, ``run_command``).

A command is a shell line (run with ``/bin/sh -c``) or a list of words (run as they are). It
runs in a process group of its own, so a timeout or an interrupt can end everything it
spawned, not only the shell; a confined command (``confine``, the OS sandbox) also runs in a
PID namespace of its own, and its end ends every process in it. Output goes to a file rather than
a pipe, so a chatty command can never block on a full pipe buffer while the harness waits for
it; the harness reads the file back afterwards and keeps only the tail.

An unconfined child's environment is a copy of the harness's own with secrets removed: a
verify command has no business seeing the provider's API key. A confined one gets only the
sandbox's allowlisted environment.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from overnight.core.errors import DiskFull, WorkspaceError
from overnight.secrecy import is_secret_name, secret_values
from overnight.store.atomic import open_private, private_dir

#: How long a process group gets between SIGTERM and SIGKILL.
TERM_GRACE_S = 2.0

#: How long to wait, after SIGKILL, for the kernel to finish off the group.
_KILL_SETTLE_S = 1.0

_READ_CHUNK = 1 << 20

#: How much of a command's output ``run_command`` keeps in ``output`` (its tail).
MAX_OUTPUT = 20_000

#: What a secret value is replaced with.
REDACTED = b"[redacted]"
#: Output is redacted this many bytes at a time.
REDACT_CHUNK = 1 << 20


def _redact_sink(sink: IO[bytes], secrets: list[str]) -> None:
    """Replace every secret value in a command's output file with ``[redacted]``: a command
    may print one it found elsewhere (a file, a config) than in its environment.

    The file is read in chunks and never whole (a command may print gigabytes), through
    ``redact_stream``; only when a secret was found is the clean copy written back.
    """
    if not secrets:
        return
    sink.flush()
    sink.seek(0)
    with tempfile.TemporaryFile(prefix="overnight-redact-") as clean:
        if not redact_stream(sink, clean, secrets):
            return
        clean.seek(0)
        sink.seek(0)
        sink.truncate()
        shutil.copyfileobj(clean, sink, REDACT_CHUNK)
        sink.flush()


def redact_stream(
    source: IO[bytes], sink: IO[bytes], secrets: Sequence[str], chunk: int = REDACT_CHUNK
) -> bool:
    """Copy ``source`` to ``sink`` with every secret value replaced by ``[redacted]``, holding
    at most about ``chunk`` bytes plus twice the longest secret in memory; whether any was
    found.

    Each round holds back at least the last ``longest - 1`` bytes read, and cuts only where
    no occurrence of a secret straddles the cut, so a secret split across two reads is whole
    when it is replaced; the result is what replacing in the whole output would give (longest
    secret first). Best effort by nature: a secret printed reversed, encoded or cut by other
    bytes is not recognized; the real defense is that no secret is readable where model-run
    code runs.
    """
    needles = sorted({s.encode() for s in secrets if s}, key=len, reverse=True)
    if not needles:
        shutil.copyfileobj(source, sink, chunk)
        return False
    hold = len(needles[0]) - 1
    found = False
    pending = b""
    while True:
        data = source.read(chunk)
        buffer = pending + data
        cut = len(buffer) if not data else _safe_cut(buffer, len(buffer) - hold, needles)
        head = buffer[:cut]
        for needle in needles:
            if needle in head:
                found = True
                head = head.replace(needle, REDACTED)
        sink.write(head)
        pending = buffer[cut:]
        if not data:
            return found


def _safe_cut(buffer: bytes, cut: int, needles: list[bytes]) -> int:
    """The largest position at most ``cut`` that no occurrence of a needle straddles (one
    that starts before ``cut`` ends inside ``buffer``: ``cut`` leaves room for the longest)."""
    cut = max(0, cut)
    while cut > 0:
        earliest = cut
        for needle in needles:
            at = buffer.find(needle, max(0, cut - len(needle) + 1), cut + len(needle) - 1)
            if at != -1:
                earliest = min(earliest, at)
        if earliest == cut:
            return cut
        cut = earliest
    return 0


def scrubbed_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``base`` (default: ``os.environ``) without any secret-looking variable."""
    source = os.environ if base is None else base
    return {name: value for name, value in source.items() if not is_secret_name(name)}


class Confinement(Protocol):
    """How a command is wrapped to run confined (``overnight.sandbox.Sandbox``)."""

    @property
    def env(self) -> Mapping[str, str]:
        """The whole environment of a confined command."""
        ...

    def command(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        info_fd: int | None = None,
        files: Sequence[Path] = (),
    ) -> list[str]:
        """The command line running ``argv`` confined in ``cwd``; the confinement writes
        ``{"child-pid": N}`` to ``info_fd``, the first process of its PID namespace.
        ``files`` are regular files made readable at their own path wherever they are (the
        program a user's entry names), or unix sockets made reachable there (the metering
        proxy a CLI agent reaches its model through). ``cwd`` may be lent to the confined
        process's uid until ``release``."""
        ...

    def release(self, cwd: Path) -> None:
        """Take back what ``command`` lent for ``cwd``, once every confined process of that
        command has ended."""
        ...


@dataclass(frozen=True)
class WithAdditions:
    """A confinement whose commands also get ``env`` and see ``files`` (read-only)."""

    inner: Confinement
    additions: Mapping[str, str] = field(default_factory=dict)
    files: tuple[Path, ...] = ()

    @property
    def env(self) -> Mapping[str, str]:
        return {**self.inner.env, **self.additions}

    def command(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        info_fd: int | None = None,
        files: Sequence[Path] = (),
    ) -> list[str]:
        return self.inner.command(argv, cwd=cwd, info_fd=info_fd, files=[*files, *self.files])

    def release(self, cwd: Path) -> None:
        self.inner.release(cwd)


@dataclass(frozen=True)
class CommandResult:
    """What a command did.

    ``exit_code`` is None when the harness ended the command (timeout or interrupt); a
    command killed by a signal nobody in the harness sent reports ``128 + signal number``, as
    a shell would. ``output`` is stdout and stderr interleaved, cut to its tail.
    """

    exit_code: int | None
    timed_out: bool
    interrupted: bool
    output: str
    seconds: float
    log_path: Path | None


def run_command(
    command: str | Sequence[str],
    *,
    cwd: Path,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    confine: Confinement | None = None,
    should_stop: Callable[[], str | None] | None = None,
    log_path: Path | None = None,
    max_output: int = MAX_OUTPUT,
    poll_s: float = 0.05,
    on_spawn: Callable[[int], None] | None = None,
    stdin: bytes | None = None,
    pass_fds: Sequence[int] = (),
    place: Callable[[str], str] | None = None,
) -> CommandResult:
    """Run ``command`` in ``cwd`` and wait for it, never longer than ``timeout_s``: a string
    with ``/bin/sh -c``, a list of words as it is. With ``confine`` it runs in the sandbox,
    with the sandbox's environment (``env`` must then be None).

    ``should_stop`` is polled while the command runs; when it returns a signal name the
    command's process group is ended and the result says ``interrupted`` (nothing is raised:
    the caller decides what the interrupt means). The full output is kept in ``log_path``
    when one is given; ``output`` holds at most ``max_output`` characters of its tail, after
    a marker line saying how much was cut (a ``max_output`` shorter than that marker yields
    the marker alone).

    ``on_spawn`` is called with the process group id as soon as the command has started
    (the harness records it, so that a later process can end the group if this one is
    killed outright before it could).

    ``stdin`` is what the command reads on its standard input (from a file, never a pipe the
    harness must keep feeding); without it, the command reads an empty input.

    ``pass_fds`` are descriptors the command inherits (a file the harness reads afterwards).

    ``place`` is applied to the output before it is cut to its tail (``overnight.core.places``:
    the paths of where the command ran written the same wherever that was, so that the cut
    falls in the same place); the log keeps the output as printed.

    Whatever happens, including an exception in ``should_stop`` or ``on_spawn``, the whole
    process group is ended and the shell reaped before this returns; a confined command's
    whole PID namespace too.
    """
    if not cwd.is_dir():
        raise WorkspaceError(f"cannot run {command!r}: directory {cwd} does not exist")
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
    if not argv:
        raise WorkspaceError("cannot run an empty command")
    info: tuple[int, int] | None = None
    if confine is not None:
        if env is not None:
            raise ValueError("a confined command gets the sandbox's environment, not env")
        info = os.pipe()
        argv = confine.command(argv, cwd=cwd, info_fd=info[1])
        child_env = dict(confine.env)
    else:
        child_env = dict(scrubbed_env() if env is None else env)
    try:
        sink = _open_sink(log_path)
    except BaseException:
        _close_info(info)
        _release(confine, cwd)
        raise
    with sink, _open_source(stdin) as source:
        start = time.monotonic()
        try:
            keep = (*pass_fds, *(() if info is None else (info[1],)))
            proc = _spawn(argv, cwd, child_env, sink, keep, source)
        except BaseException:
            _close_info(info)
            _release(confine, cwd)
            raise
        if info is not None:
            os.close(info[1])
        timed_out = interrupted = False
        try:
            if on_spawn is not None:
                on_spawn(proc.pid)
            deadline = start + timeout_s
            while True:
                try:
                    proc.wait(timeout=max(0.0, min(poll_s, deadline - time.monotonic())))
                    break
                except subprocess.TimeoutExpired:
                    pass
                if time.monotonic() >= deadline:
                    timed_out = True
                    break
                if should_stop is not None and should_stop() is not None:
                    interrupted = True
                    break
        finally:
            try:
                _end_group(proc)
            finally:
                if info is not None:
                    _end_namespace(info[0])
                _release(confine, cwd)
        seconds = time.monotonic() - start
        _redact_sink(sink, secret_values())
        shown = None if log_path is None else str(log_path)
        if place is not None and shown is not None:
            shown = place(shown)
        output = _read_tail(sink, max_output, shown, place)

    exit_code: int | None = None
    if not (timed_out or interrupted):
        code = proc.returncode
        exit_code = 128 - code if code < 0 else code
    return CommandResult(
        exit_code=exit_code,
        timed_out=timed_out,
        interrupted=interrupted,
        output=output,
        seconds=seconds,
        log_path=log_path,
    )


def _open_sink(log_path: Path | None) -> IO[bytes]:
    try:
        if log_path is None:
            return tempfile.TemporaryFile(prefix="overnight-cmd-")
        private_dir(log_path.parent)
        return open_private(log_path, "w+b")
    except OSError as exc:
        where = "a temporary file" if log_path is None else str(log_path)
        if exc.errno == errno.ENOSPC:
            raise DiskFull(f"cannot create {where} for command output: {exc}") from exc
        raise WorkspaceError(f"cannot create {where} for command output: {exc}") from exc


@contextlib.contextmanager
def _open_source(data: bytes | None) -> Iterator[IO[bytes] | None]:
    """``data`` in an unlinked temporary file, rewound, for a command's standard input."""
    if data is None:
        yield None
        return
    with contextlib.ExitStack() as stack:
        try:
            source = stack.enter_context(tempfile.TemporaryFile(prefix="overnight-stdin-"))
            source.write(data)
            source.flush()
            source.seek(0)
        except OSError as exc:
            what = f"cannot create a temporary file for command input: {exc}"
            if exc.errno == errno.ENOSPC:
                raise DiskFull(what) from exc
            raise WorkspaceError(what) from exc
        yield source


def _spawn(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    sink: IO[bytes],
    keep: tuple[int, ...],
    source: IO[bytes] | None = None,
) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL if source is None else source,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            pass_fds=keep,
        )
    except OSError as exc:
        raise WorkspaceError(f"cannot start {argv[0]!r} in {cwd}: {exc}") from exc


def _release(confine: Confinement | None, cwd: Path) -> None:
    if confine is not None:
        confine.release(cwd)


def _close_info(info: tuple[int, int] | None) -> None:
    if info is not None:
        for fd in info:
            with contextlib.suppress(OSError):
                os.close(fd)


def _end_namespace(info_read: int) -> None:
    """Make sure the confined command's PID namespace is gone: its first process dies with
    bubblewrap, and the kernel then ends every process in the namespace; if it is still
    running (it never should be), kill it, which has the same effect."""
    try:
        with os.fdopen(info_read, "rb") as handle:
            data = handle.read(1 << 16)
        pid = int(json.loads(data or b"{}").get("child-pid", 0))
    except (OSError, ValueError, AttributeError):
        return
    if pid <= 1:
        return
    if _wait_until(lambda: not _running(pid), _KILL_SETTLE_S, 0.01):
        return
    if not _in_other_pid_namespace(pid):
        return  # the id now names some other process: not ours to end
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)
    _wait_until(lambda: not _running(pid), _KILL_SETTLE_S, 0.01)


def _in_other_pid_namespace(pid: int) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid")
    except OSError:
        return False


def _running(pid: int) -> bool:
    fields = _stat_fields(Path("/proc", str(pid), "stat"))
    return fields is not None and bool(fields) and fields[0] not in (b"Z", b"X")


def _end_group(proc: subprocess.Popen[bytes]) -> None:
    """End the command's process group and reap the shell.

    Also runs after a normal exit: a command may have left background jobs running, and
    those belong to the harness's command, not to the machine.
    """
    pgid = proc.pid  # start_new_session made the shell the leader of its own group
    try:
        _terminate_group(pgid, lambda: proc.poll() is not None and not _group_alive(pgid))
    finally:
        proc.wait()


def process_identity(pid: int) -> str | None:
    """What tells process ``pid`` apart from a later process given the same id: the boot id
    and the start time since boot. None when the process is gone or there is no procfs."""
    boot = _boot_id()
    fields = _stat_fields(Path("/proc", str(pid), "stat"))
    if boot is None or fields is None or len(fields) < 20:
        return None
    return f"{boot}:{fields[19].decode()}"  # field 22 of stat: starttime


def end_orphaned_group(pgid: int, identity: str) -> bool:
    """End the process group of a command whose harness was killed outright (kill -9) and so
    could not end it; ``identity`` is what ``process_identity`` said when it started. The
    group is ended only if it is provably that command's: its leader is the same process
    (same boot, same start time), or its leader is gone while the group lives on in the same
    boot (an id stays taken while a group uses it). Returns whether a group was ended."""
    if not _group_alive(pgid):
        return False
    now = process_identity(pgid)
    if now is None:
        boot = _boot_id()
        if boot is None or identity.partition(":")[0] != boot:
            return False
    elif now != identity:
        return False  # the id belongs to another process now
    _terminate_group(pgid, lambda: not _group_alive(pgid))
    return True


def _terminate_group(pgid: int, gone: Callable[[], bool]) -> None:
    """SIGTERM process group ``pgid``, give it TERM_GRACE_S, SIGKILL what is left and give the
    kernel _KILL_SETTLE_S to finish it off; ``gone`` says when the group is ended. Nothing is
    sent once it is."""
    if gone():
        return
    _signal_group(pgid, signal.SIGTERM)
    if _wait_until(gone, TERM_GRACE_S, 0.02):
        return
    _signal_group(pgid, signal.SIGKILL)
    _wait_until(gone, _KILL_SETTLE_S, 0.01)


def _wait_until(done: Callable[[], bool], seconds: float, poll_s: float) -> bool:
    """Poll ``done`` every ``poll_s`` for at most ``seconds``; whether it became true."""
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return None


def _stat_fields(path: Path) -> list[bytes] | None:
    """The fields of a /proc/<pid>/stat after the command name (state, ppid, pgrp, ...)."""
    try:
        stat = path.read_bytes()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is still running.

    Zombies do not count: the members orphaned by the shell's death are reaped by init (or a
    subreaper) on its own schedule, which can take a while, and they no longer run anything.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _has_running_member(pgid)


def _has_running_member(pgid: int) -> bool:
    proc_root = Path("/proc")
    if not (proc_root / "self" / "stat").exists():
        return True  # no procfs: cannot tell zombies apart, so assume the worst
    for entry in os.scandir(proc_root):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_bytes()
        except OSError:
            continue
        # The command name (field 2) may contain spaces and parentheses: split after the
        # last ')'. What follows is: state, ppid, pgrp, ...
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) < 3:
            continue
        state, pgrp = fields[0], fields[2]
        if pgrp == str(pgid).encode() and state not in (b"Z", b"X"):
            return True
    return False


def decoded(handle: IO[bytes], place: Callable[[str], str] | None = None) -> Iterator[str]:
    """The text of ``handle`` (UTF-8, an undecodable byte shown as U+FFFD) in pieces, read a
    chunk at a time. With ``place``, each piece is ``place`` applied to whole lines (a line
    longer than a chunk is placed a chunk at a time), so a path is never split between two
    calls of it."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    while True:
        chunk = handle.read(_READ_CHUNK)
        text = decoder.decode(chunk, final=not chunk)
        if place is None:
            if text:
                yield text
        else:
            pending += text
            end = pending.rfind("\n") + 1
            if not chunk or (end == 0 and len(pending) > _READ_CHUNK):
                end = len(pending)
            if end:
                yield place(pending[:end])
                pending = pending[end:]
        if not chunk:
            return


def _read_tail(
    sink: IO[bytes],
    max_output: int,
    shown: str | None,
    place: Callable[[str], str] | None = None,
) -> str:
    """Decode the whole output file (with ``place`` applied), counting characters but keeping
    only the tail; ``shown``: the log as the marker names it."""
    sink.seek(0)
    total = 0
    tail = ""
    for text in decoded(sink, place):
        total += len(text)
        tail = (tail + text)[-max_output:] if max_output > 0 else ""
    if total <= max_output:
        return tail
    # The marker's length depends on the count it reports, which depends on how much of the
    # tail fits next to it: iterate to the fixed point (keep only ever shrinks, so it ends).
    keep = max_output
    while True:
        marker = _cut_marker(total - keep, shown)
        new_keep = max(0, max_output - len(marker))
        if new_keep == keep:
            break
        keep = new_keep
    return marker + (tail[-keep:] if keep else "")


def _cut_marker(cut: int, shown: str | None) -> str:
    where = f"; full output in {shown}" if shown is not None else ""
    return f"[overnight: {cut} characters cut from the start of the output{where}]\n"


def placed_output(
    result: CommandResult, place: Callable[[str], str], max_output: int = MAX_OUTPUT
) -> str:
    """``result.output`` as ``place`` writes it (``overnight.core.places``), cut to its tail
    only afterwards: read again from the log, which holds the whole output, so that where it
    is cut and the count of what was cut do not depend on how long the places were. Without
    a readable log, ``output`` placed (cut already, which only an output longer than
    ``max_output`` shows)."""
    if result.log_path is None:
        return place(result.output)
    try:
        with open(result.log_path, "rb") as log:
            return _read_tail(log, max_output, place(str(result.log_path)), place)
    except OSError:
        return place(result.output)

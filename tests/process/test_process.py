"""run_command and scrubbed_env against real shells and real processes."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from overnight.core.errors import WorkspaceError
from overnight.process import run_command, scrubbed_env


def _running_members(pgid: int) -> list[int]:
    """Pids of group ``pgid`` that are not zombies (zombies wait for init, not for us)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def _assert_group_gone(pgid: int) -> None:
    assert _running_members(pgid) == [], "a process of the command's group still runs"


def _assert_group_reaped(pgid: int) -> None:
    """The stronger check: the group does not exist at all.

    Members orphaned by the shell's death linger as zombies until init reaps them, which
    some inits do only every second or so; that wait is theirs, so it is polled for here.
    """
    _assert_group_gone(pgid)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail(f"process group {pgid} still exists")


@pytest.mark.parametrize("code", [0, 1, 3])
def test_exit_code_comes_back(tmp_path: Path, code: int) -> None:
    result = run_command(f"exit {code}", cwd=tmp_path, timeout_s=10)
    assert result.exit_code == code
    assert not result.timed_out
    assert not result.interrupted


def test_stdout_and_stderr_are_interleaved_in_order(tmp_path: Path) -> None:
    result = run_command("echo one; echo two >&2; echo three", cwd=tmp_path, timeout_s=10)
    assert result.output == "one\ntwo\nthree\n"


def test_command_runs_in_cwd_with_no_stdin(tmp_path: Path) -> None:
    result = run_command("pwd; cat; echo done", cwd=tmp_path, timeout_s=10)
    assert result.output == f"{tmp_path.resolve()}\ndone\n"


def test_stdin_is_read_from_a_file_however_large(tmp_path: Path) -> None:
    """Input larger than a pipe's buffer: the command reads it all while the harness, which
    never feeds a pipe, just waits."""
    body = b"line\n" * 100_000  # 500 kB, far over a 64 kB pipe
    r = run_command("wc -l", cwd=tmp_path, timeout_s=10, stdin=body)
    assert r.exit_code == 0 and r.output.strip() == "100000"


def test_signal_death_reports_shell_style_code(tmp_path: Path) -> None:
    result = run_command("kill -9 $$", cwd=tmp_path, timeout_s=10)
    assert result.exit_code == 128 + 9


def test_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run_command("echo $$; sleep 30 & sleep 30", cwd=tmp_path, timeout_s=0.5)
    assert time.monotonic() - started < 5
    assert result.timed_out
    assert result.exit_code is None
    assert not result.interrupted
    _assert_group_reaped(int(result.output.split()[0]))


def test_term_ignoring_command_is_killed(tmp_path: Path) -> None:
    result = run_command("trap '' TERM; echo $$; sleep 30", cwd=tmp_path, timeout_s=0.3)
    assert result.timed_out
    assert result.seconds < 5  # 0.3 s + the 2 s grace + a little
    _assert_group_gone(int(result.output.split()[0]))


def test_background_job_left_by_a_finished_command_is_ended(tmp_path: Path) -> None:
    result = run_command("sleep 30 & echo $$", cwd=tmp_path, timeout_s=10)
    assert result.exit_code == 0
    _assert_group_gone(int(result.output.split()[0]))


def test_should_stop_interrupts_promptly(tmp_path: Path) -> None:
    asked_at = time.monotonic() + 0.3

    def should_stop() -> str | None:
        return "SIGTERM" if time.monotonic() >= asked_at else None

    result = run_command(
        "echo $$; sleep 30 & sleep 30", cwd=tmp_path, timeout_s=60, should_stop=should_stop
    )
    assert result.interrupted
    assert not result.timed_out
    assert result.exit_code is None
    assert result.seconds < 2
    _assert_group_gone(int(result.output.split()[0]))


def test_exception_in_should_stop_still_ends_the_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"

    def should_stop() -> str | None:
        if pid_file.exists() and pid_file.read_text().strip():
            raise RuntimeError("boom")
        return None

    with pytest.raises(RuntimeError):
        run_command(
            f"echo $$ > {pid_file}; sleep 30", cwd=tmp_path, timeout_s=60, should_stop=should_stop
        )
    _assert_group_gone(int(pid_file.read_text()))


def test_long_output_keeps_tail_with_marker_and_full_log(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "cmd.log"
    full = "".join(f"{n}\n" for n in range(1, 20_001))
    result = run_command("seq 1 20000", cwd=tmp_path, timeout_s=10, log_path=log, max_output=1000)
    assert result.exit_code == 0
    assert result.log_path == log
    assert log.read_text() == full
    assert len(result.output) == 1000
    marker, _, tail = result.output.partition("\n")
    assert full.endswith(tail)
    assert tail.endswith("19999\n20000\n")
    cut = len(full) - len(tail)
    assert f"{cut} characters cut" in marker
    assert str(log) in marker


def test_short_output_is_untouched(tmp_path: Path) -> None:
    result = run_command("printf abc", cwd=tmp_path, timeout_s=10, max_output=3)
    assert result.output == "abc"


def test_large_output_does_not_deadlock(tmp_path: Path) -> None:
    five_mb = 5 * 1024 * 1024
    result = run_command(
        f"head -c {five_mb} /dev/zero | tr '\\0' x; echo; echo end",
        cwd=tmp_path,
        timeout_s=10,
    )
    assert result.exit_code == 0
    assert not result.timed_out
    assert result.output.endswith("xxx\nend\n")
    assert len(result.output) == 20_000


def test_secrets_do_not_reach_the_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "leak-check-1")
    monkeypatch.setenv("OPENAI_API_KEY", "leak-check-2")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "leak-check-3")
    monkeypatch.setenv("HOME", str(tmp_path))
    result = run_command("env", cwd=tmp_path, timeout_s=10)
    names = {line.split("=", 1)[0] for line in result.output.splitlines() if "=" in line}
    assert not names & {"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "MY_SERVICE_TOKEN"}
    assert "leak-check" not in result.output
    assert f"HOME={tmp_path}" in result.output.splitlines()
    assert f"PATH={os.environ['PATH']}" in result.output.splitlines()


def test_scrubbed_env_rules() -> None:
    base = {
        "PATH": "/bin",
        "HOME": "/home/me",
        "PYTHONHASHSEED": "0",
        "KEYTIMEOUT": "1",
        "SSH_AUTH_SOCK": "/tmp/agent",
        "GH_TOKEN": "x",
        "github_token": "x",
        "Anthropic_Api_Key": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_SESSION_TOKEN": "x",
        "STRIPE_KEY": "x",
        "APP_SECRET": "x",
        "MY_SECRET_THING": "x",
        "DB_PASSWORD": "x",
        "db_passwd": "x",
        "GOOGLE_APPLICATION_CREDENTIALS": "x",
    }
    assert scrubbed_env(base) == {
        "PATH": "/bin",
        "HOME": "/home/me",
        "PYTHONHASHSEED": "0",
        "KEYTIMEOUT": "1",
        "SSH_AUTH_SOCK": "/tmp/agent",
    }


def test_missing_cwd_raises_workspace_error(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError):
        run_command("true", cwd=tmp_path / "nope", timeout_s=10)

"""The OS sandbox against real bubblewrap: what a confined command can see, write, reach and
leave behind."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from overnight.process import CommandResult, run_command
from overnight.sandbox import (
    Sandbox,
    SandboxSpec,
    SandboxUnavailable,
    build_sandbox,
    probe,
    sandbox_env,
)
from tests.helpers.sandbox import bwrap

pytestmark = pytest.mark.usefixtures("bwrap")
__all__ = ["bwrap"]

CANARY_KEY = "sk-ant-api03-sandbox-canary-9f1e"


class Places:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.run = root / "run"
        self.worktree = self.run / "worktree"
        self.repo = root / "repo"
        self.home = root / "home"
        self.elsewhere = root / "elsewhere"
        for d in (self.worktree, self.repo / ".git" / "hooks", self.home / ".tool" / "bin"):
            d.mkdir(parents=True)
        self.elsewhere.mkdir()
        (self.run / "spend.jsonl").write_text('{"usd": 1.0}\n')
        (self.run / "spec.json").write_text('{"budget": {"usd": 1.0}}\n')
        (self.repo / "README.md").write_text("the user's checkout\n")
        (self.home / ".netrc").write_text("machine example.com password hunter2\n")
        tool = self.home / ".tool" / "bin" / "greet"
        tool.write_text("#!/bin/sh\necho hello from a home toolchain\n")
        tool.chmod(0o755)
        (self.worktree / "app.py").write_text("print('app')\n")
        (self.worktree / ".git").write_text(f"gitdir: {self.repo}/.git/worktrees/w\n")


@pytest.fixture(params=["tmp", "var-tmp"])
def places(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Places]:
    """Under /tmp (private to the sandbox as a whole) and under /var/tmp (on the machine's
    own filesystem, where hiding is done place by place)."""
    if request.param == "tmp":
        yield Places(tmp_path)
        return
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="overnight-sandbox-test-", dir="/var/tmp"))
    try:
        yield Places(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def sandbox_for(places: Places, monkeypatch: pytest.MonkeyPatch, **spec: object) -> Sandbox:
    path = os.environ.get("PATH", "")
    monkeypatch.setenv("PATH", f"{places.home / '.tool' / 'bin'}{os.pathsep}{path}")
    return build_sandbox(
        SandboxSpec.model_validate(spec),
        sealed=[places.run, places.repo],
        home=places.home,
        writable=[Path(str(w)) for w in spec.get("writable", [])],  # type: ignore[attr-defined]
    )


def run(sb: Sandbox, places: Places, script: str, timeout_s: float = 30) -> CommandResult:
    return run_command(
        ["/bin/sh", "-c", script], cwd=places.worktree, timeout_s=timeout_s, confine=sb
    )


def test_the_worktree_is_writable_and_its_git_file_is_not(
    places: Places, monkeypatch: pytest.MonkeyPatch
) -> None:
    sb = sandbox_for(places, monkeypatch)
    result = run(sb, places, "echo fixed > app.py && echo new > new.py && echo ok")
    assert result.exit_code == 0, result.output
    assert (places.worktree / "app.py").read_text() == "fixed\n"
    assert (places.worktree / "new.py").exists()
    before = (places.worktree / ".git").read_text()
    result = run(sb, places, "echo 'gitdir: /tmp/evil' > .git; rm -f .git; mv .git x; true")
    assert (places.worktree / ".git").read_text() == before
    assert not (places.worktree / "x").exists()


def test_the_run_directory_the_checkout_and_home_are_not_visible(
    places: Places, monkeypatch: pytest.MonkeyPatch
) -> None:
    sb = sandbox_for(places, monkeypatch)
    for path in (places.run / "spend.jsonl", places.repo / "README.md", places.home / ".netrc"):
        result = run(sb, places, f"cat {path}")
        assert result.exit_code != 0, path
        assert "hunter2" not in result.output and "usd" not in result.output
    listed = run(
        sb,
        places,
        f"ls -A {places.run} {places.repo} {places.home} {places.root} 2>/dev/null",
    )
    shown = [w for w in listed.output.split() if not w.endswith(":")]
    # only what was bound back (the worktree, a toolchain in home) and the empty places
    assert sorted(shown) == sorted([".tool", "worktree", *_root_entries(places)]), shown
    # a toolchain found through PATH in the hidden home still runs
    assert run(sb, places, "greet").output.strip() == "hello from a home toolchain"
    # and the Python running the harness is there
    py = run(sb, places, f"{sys.executable} -c 'print(40 + 2)'")
    assert py.output.strip() == "42", py.output


def _root_entries(places: Places) -> list[str]:
    # The view is an allowlist: only the ways down to what is shown exist (no "elsewhere",
    # no "repo"), under /tmp and under /var/tmp alike.
    return ["home", "run"]


def test_nothing_outside_the_worktree_can_be_written(
    places: Places, monkeypatch: pytest.MonkeyPatch
) -> None:
    sb = sandbox_for(places, monkeypatch)
    script = (
        f"echo '{{\"usd\": 1000}}' > ../spec.json; echo > ../spend.jsonl; "
        f"echo hook > {places.repo}/.git/hooks/post-checkout; "
        f"echo x > {places.elsewhere}/planted; echo x > {places.home}/planted; "
        "echo x > /usr/planted-by-sandbox; echo x > /var/tmp/planted-by-sandbox; true"
    )
    result = run(sb, places, script)
    assert result.exit_code == 0 and "Read-only file system" in result.output, result.output
    assert (places.run / "spec.json").read_text() == '{"budget": {"usd": 1.0}}\n'
    assert (places.run / "spend.jsonl").read_text() == '{"usd": 1.0}\n'
    assert not (places.repo / ".git" / "hooks" / "post-checkout").exists()
    assert list(places.elsewhere.iterdir()) == []
    assert not (places.home / "planted").exists()
    assert not Path("/usr/planted-by-sandbox").exists()
    assert not Path("/var/tmp/planted-by-sandbox").exists()


def test_a_writable_path_from_the_spec_can_be_written(
    places: Places, monkeypatch: pytest.MonkeyPatch
) -> None:
    sb = sandbox_for(places, monkeypatch, writable=[str(places.elsewhere)])
    assert run(sb, places, f"echo x > {places.elsewhere}/out").exit_code == 0
    assert (places.elsewhere / "out").read_text() == "x\n"


def test_the_environment_is_an_allowlist(places: Places, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY_KEY)
    monkeypatch.setenv("INNOCENT_LOOKING", "canary-value-31")
    monkeypatch.setenv("BILLING_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv("LC_TIME", "C")
    sb = sandbox_for(places, monkeypatch, env=["BILLING_URL"])
    result = run(sb, places, "env")
    names = {line.partition("=")[0] for line in result.output.splitlines() if "=" in line}
    assert names <= {
        "PATH",
        "HOME",
        "TMPDIR",
        "LANG",
        "TZ",
        "TERM",
        "LC_TIME",
        "BILLING_URL",
        "PYTHONDONTWRITEBYTECODE",
        "PWD",
        "SHLVL",
        "_",
    }
    assert "BILLING_URL" in names and "LC_TIME" in names
    assert "PYTHONDONTWRITEBYTECODE" in names  # no bytecode left for a candidate to carry
    assert CANARY_KEY not in result.output and "canary-value-31" not in result.output
    home = run(sb, places, 'echo "$HOME"; touch "$HOME/x" && echo writable').output.split()
    assert home[0] != str(places.home) and home[0] != str(Path.home())
    assert home[1] == "writable"


def test_no_process_of_the_harness_is_visible(
    places: Places, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY_KEY)
    sb = sandbox_for(places, monkeypatch)
    result = run(sb, places, "cat /proc/$PPID/environ /proc/*/environ 2>/dev/null | tr '\\0' '\\n'")
    assert CANARY_KEY not in result.output
    pids = run(sb, places, "ls /proc | grep -E '^[0-9]+$'").output.split()
    assert all(int(p) < 10 for p in pids), pids  # its own small PID namespace
    assert str(os.getpid()) not in pids or os.getpid() < 10
    caps = run(sb, places, "grep CapEff /proc/self/status").output.split()
    assert caps[-1] == "0000000000000000"


@pytest.fixture
def loopback_server() -> Iterator[int]:
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()


def _fetch(port: int) -> str:
    return (
        f'{sys.executable} -c "import urllib.request; '
        f"urllib.request.urlopen('http://127.0.0.1:{port}/', timeout=3); print('reached')\""
    )


def test_no_network_unless_the_spec_allows_it(
    places: Places, monkeypatch: pytest.MonkeyPatch, loopback_server: int
) -> None:
    closed = run(sandbox_for(places, monkeypatch), places, _fetch(loopback_server))
    assert closed.exit_code != 0 and "reached" not in closed.output
    opened = run(sandbox_for(places, monkeypatch, network=True), places, _fetch(loopback_server))
    assert opened.exit_code == 0 and "reached" in opened.output, opened.output


def test_a_setsid_grandchild_dies_with_its_command(
    places: Places, monkeypatch: pytest.MonkeyPatch
) -> None:
    sb = sandbox_for(places, monkeypatch)
    script = "setsid sh -c 'sleep 1.5; echo alive > outlived' > /dev/null 2>&1 & echo started"
    result = run(sb, places, script)
    assert result.exit_code == 0 and "started" in result.output
    time.sleep(2.5)
    assert not (places.worktree / "outlived").exists()


def test_a_timeout_ends_the_whole_sandbox(places: Places, monkeypatch: pytest.MonkeyPatch) -> None:
    sb = sandbox_for(places, monkeypatch)
    script = "setsid sh -c 'sleep 2; echo alive > outlived' & sleep 60"
    start = time.monotonic()
    result = run(sb, places, script, timeout_s=1)
    assert result.timed_out and time.monotonic() - start < 10
    time.sleep(2.5)
    assert not (places.worktree / "outlived").exists()


def test_resource_limits_hold(places: Places, monkeypatch: pytest.MonkeyPatch) -> None:
    sb = sandbox_for(places, monkeypatch, file_size_mb=1, cpu_seconds=1, address_space_mb=512)
    big = run(sb, places, "head -c 3000000 /dev/zero > big.bin")
    assert big.exit_code != 0
    assert (places.worktree / "big.bin").stat().st_size <= 1 << 20
    spin = run(sb, places, "while :; do :; done", timeout_s=30)
    assert spin.exit_code is not None and spin.exit_code != 0  # SIGXCPU, long before 30 s
    grab = run(sb, places, f"{sys.executable} -c 'b = bytearray(2 << 30)'")
    assert grab.exit_code != 0 and "MemoryError" in grab.output


def test_the_probe_reports_what_bubblewrap_said(
    places: Places, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "bwrap").write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n"
    )
    (fake / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    sb = build_sandbox(SandboxSpec(), sealed=[places.run], home=places.home)
    with pytest.raises(SandboxUnavailable) as err:
        probe(sb)
    assert "No permissions to creating new namespace" in str(err.value)
    assert 'mode = "off"' in str(err.value)


def test_without_bubblewrap_the_sandbox_says_how_to_install_it(
    places: Places, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    empty = tmp_path / "nothing"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        build_sandbox(SandboxSpec(), sealed=[places.run], home=places.home)


def test_the_real_probe_passes_here(places: Places, monkeypatch: pytest.MonkeyPatch) -> None:
    probe(sandbox_for(places, monkeypatch))


def test_sockets_under_run_are_out_of_reach(
    places: Places, monkeypatch: pytest.MonkeyPatch
) -> None:
    sb = sandbox_for(places, monkeypatch)
    # /run is not in the allowlist: not there at all, so no socket of the machine's is either
    assert run(sb, places, "test -e /run && echo present || echo absent").output.strip() == "absent"


def test_a_command_started_without_the_sandbox_sees_the_harness_env(
    places: Places, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control case: outside the sandbox the same command reads the run's files."""
    out = subprocess.run(
        ["/bin/sh", "-c", "cat ../spend.jsonl"], cwd=places.worktree, capture_output=True, text=True
    )
    assert "usd" in out.stdout


def test_layout_brings_back_toolchains_but_never_a_sealed_place(tmp_path: Path) -> None:
    from overnight.sandbox import plan_layout

    home = tmp_path / "home"
    work = tmp_path / "work"
    run_dir = home / ".overnight" / "runs" / "r1"
    venv = work / ".venv"
    for d in (home / ".pyenv" / "shims", home / "bin", venv / "bin", run_dir, work / ".git"):
        d.mkdir(parents=True)
    layout = plan_layout(
        sealed=[run_dir, work],
        home=home,
        path_entries=[str(home / ".pyenv" / "shims"), str(home / "bin"), str(venv / "bin")],
        python_prefixes=[],
    )
    back = {dest for _src, dest in layout.readable}
    # a shims directory brings back its prefix; a bin directory right under home only itself
    # (its prefix would be home); a virtualenv inside the workspace comes back alone
    assert back == {home / ".pyenv", home / "bin", venv}
    assert all(not (run_dir == d or run_dir.is_relative_to(d)) for d in back)
    assert set(layout.hidden) == {home, work, run_dir}


def test_layout_refuses_a_path_entry_that_contains_the_run(tmp_path: Path) -> None:
    from overnight.sandbox import plan_layout

    home = tmp_path / "home"
    run_dir = home / "tools" / "bin" / "runs" / "r1"
    run_dir.mkdir(parents=True)
    layout = plan_layout(
        sealed=[run_dir],
        home=home,
        path_entries=[str(home / "tools" / "bin")],
        python_prefixes=[],
        readable=[home],
    )
    assert layout.readable == ()


def test_sandboxed_python_writes_no_bytecode_unless_the_spec_allows_it() -> None:
    assert sandbox_env(SandboxSpec(), {"PATH": "/bin"})["PYTHONDONTWRITEBYTECODE"] == "1"
    allowed = sandbox_env(SandboxSpec(bytecode=True), {"PATH": "/bin"})
    assert "PYTHONDONTWRITEBYTECODE" not in allowed


def test_layout_shows_a_toolchain_on_path_wherever_it_is_and_nothing_beside_it(
    tmp_path: Path,
) -> None:
    """The view is an allowlist: a prefix on PATH outside every hidden place (as /opt/tool
    for /opt/tool/bin) is shown on its own; one under /usr needs nothing (all of /usr is)."""
    from overnight.sandbox import plan_layout

    opt_tool = tmp_path / "opt" / "tool"
    (opt_tool / "bin").mkdir(parents=True)
    (tmp_path / "opt" / "secret").mkdir()
    layout = plan_layout(
        sealed=[tmp_path / "run"],
        home=tmp_path / "home",
        path_entries=[str(opt_tool / "bin"), "/usr/local/bin", "/usr/bin", "/bin"],
        python_prefixes=[],
    )
    back = {dest for _src, dest in layout.readable}
    assert back == {opt_tool}

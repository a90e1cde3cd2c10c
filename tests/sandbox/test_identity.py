"""The sandbox is not root outside it, and sees an allowlist of the machine: against real
bubblewrap, as root here (as in CI); the cases that need root skip with the reason without it,
and one re-runs the sandbox as an unprivileged user."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from overnight.process import run_command
from overnight.sandbox import Sandbox, SandboxSpec, build_sandbox, probe
from tests.helpers.sandbox import bwrap

pytestmark = pytest.mark.usefixtures("bwrap")
__all__ = ["bwrap"]

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="the harness is not root here: nothing to drop")
PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture
def place() -> Iterator[Path]:
    """A worktree on the machine's own filesystem (not under /tmp, which is private inside),
    with a sealed run directory beside it."""
    root = Path(tempfile.mkdtemp(prefix="overnight-identity-", dir="/var/tmp"))
    (root / "run" / "worktree").mkdir(parents=True)
    (root / "run" / "worktree" / "app.py").write_text("print('app')\n")
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def sandbox(place: Path, **spec: object) -> Sandbox:
    return build_sandbox(
        SandboxSpec.model_validate(spec),
        sealed=[place / "run"],
        writable=[Path(str(w)) for w in spec.get("writable", [])],  # type: ignore[attr-defined]
        readable=[Path(str(r)) for r in spec.get("readable", [])],  # type: ignore[attr-defined]
    )


def run(sb: Sandbox, place: Path, script: str, **kw: object) -> str:
    result = run_command(
        ["/bin/sh", "-c", script],
        cwd=place / "run" / "worktree",
        timeout_s=60,
        confine=sb,
        **kw,  # type: ignore[arg-type]
    )
    return result.output


@needs_root
def test_a_root_harness_runs_the_sandbox_as_an_unprivileged_uid(place: Path) -> None:
    sb = sandbox(place)
    assert sb.identity.uid != 0 and sb.identity.gid != 0 and not sb.identity.as_root
    probe(sb)
    said = run(
        sb, place, "id -u; id -g; id -G; grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status"
    )
    words = said.split()
    assert words[:3] == [str(sb.identity.uid), str(sb.identity.gid), str(sb.identity.gid)]
    assert said.count("0000000000000000") == 2 and re.search(r"NoNewPrivs:\s+1", said), said


@needs_root
def test_seen_from_outside_the_running_command_is_not_root(place: Path) -> None:
    """The harness side reads the owner of a file the command made and the uids of its
    process in /proc while it runs, then stops it."""
    sb = sandbox(place)
    worktree = place / "run" / "worktree"
    seen: dict[str, object] = {}

    def look() -> str | None:
        made = worktree / "made-inside"
        if not made.exists():
            return None
        seen["file_uid"] = made.stat().st_uid
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            if b"overnight-uid-probe" in cmdline and b"bwrap" not in cmdline:
                uids = re.search(r"^Uid:\s+(.*)$", status, re.M)
                assert uids is not None
                seen.setdefault("uids", set()).update(map(int, uids.group(1).split()))  # type: ignore[attr-defined]
        return "SIGTERM" if "uids" in seen else None

    run_command(
        [
            sys.executable,
            "-c",
            "import time; open('made-inside', 'w').close(); time.sleep(30)",
            "overnight-uid-probe",
        ],
        cwd=worktree,
        timeout_s=60,
        confine=sb,
        should_stop=look,
    )
    assert seen["file_uid"] == sb.identity.uid != 0
    assert seen["uids"] == {sb.identity.uid}
    # and once it has ended, what it made is the harness's again
    assert (worktree / "made-inside").stat().st_uid == os.geteuid()


@needs_root
def test_a_fork_bomb_is_stopped_by_the_process_limit(place: Path) -> None:
    """Each child stays alive (paused) so that it counts; the bomb must meet EAGAIN long
    before it has made 200, and every child dies with the sandbox."""
    bomb = (
        "import os, signal, sys\n"
        "for n in range(200):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except BlockingIOError:\n"
        "        print('EAGAIN after', n); sys.exit(0)\n"
        "    if pid == 0:\n"
        "        signal.pause(); os._exit(0)\n"
        "print('forked all 200')\n"
    )
    (place / "run" / "worktree" / "bomb.py").write_text(bomb)
    said = run(sandbox(place, processes=24), place, f"{sys.executable} bomb.py")
    found = re.search(r"EAGAIN after (\d+)", said)
    assert found is not None and int(found.group(1)) < 24, said
    assert "forked all" not in said


@needs_root
def test_a_file_only_root_may_read_is_not_readable_even_where_the_sandbox_may_look(
    place: Path,
) -> None:
    shown = place / "shown"
    shown.mkdir()
    (shown / "service.env").write_text("SERVICE_TOKEN=canary-0600-key\n")
    (shown / "service.env").chmod(0o600)
    (shown / "public.txt").write_text("anyone may read this\n")
    said = run(
        sandbox(place, readable=[str(shown)]),
        place,
        f"cat {shown}/public.txt; cat {shown}/service.env; cat /etc/shadow",
    )
    assert "anyone may read this" in said
    assert "canary-0600-key" not in said and "Permission denied" in said
    assert "root:" not in said


def test_the_machine_is_an_allowlist(tmp_path: Path) -> None:
    """/var, /srv, /home, /root (but for toolchains on PATH), /opt, /etc/shadow and /etc/ssh
    are not there; what toolchains need is. A place on the way to the Python prefix (a
    virtual environment under /home or /var/tmp) is there, holding only that way."""
    place = tmp_path  # under /tmp, private inside: nothing of /var is on the way to it
    (place / "run" / "worktree").mkdir(parents=True)
    sb = sandbox(place)
    hidden = [
        "/var",
        "/srv",
        "/home",
        "/opt",
        "/mnt",
        "/boot",
        "/sys",
        "/run",
        "/etc/shadow",
        "/etc/gshadow",
        "/etc/ssh",
        "/etc/sudoers",
        "/root/.bash_history",
        "/root/.ssh",
    ]
    prefixes = [Path(p) for p in {sys.prefix, sys.base_prefix}]
    on_the_way = {
        p: sorted({q.relative_to(p).parts[0] for q in prefixes if Path(p) in q.parents})
        for p in hidden
    }
    script = (
        f"for p in {' '.join(p for p in hidden if not on_the_way[p])}; do "
        "test -e $p && echo PRESENT $p; done; "
        + "".join(f"echo HOLDS {p} $(ls -A {p}); " for p in hidden if on_the_way[p])
        + "cut -d: -f1 /etc/passwd | tr '\\n' ' '; echo; "
        f"{sys.executable} -c 'import pytest, ssl; print(\"python ok\")'; "
        "rg --version >/dev/null && echo rg ok; ls /etc"
    )
    said = run(sb, place, script)
    assert "PRESENT" not in said, said
    for p, way in on_the_way.items():
        if way:
            assert f"HOLDS {p} {' '.join(way)}\n" in said, said
    users = next(line for line in said.splitlines() if not line.startswith("HOLDS")).split()
    assert set(users) <= {"root", "overnight", "nobody"}, users
    assert "python ok" in said and "rg ok" in said, said


def test_what_a_sandboxed_command_wrote_is_given_back(place: Path) -> None:
    """Ownership never outlives the command: the harness's again, new files its too, no
    set-user-id bit survives, and a link the command planted is never followed."""
    worktree = place / "run" / "worktree"
    target = place / "outside-target"
    target.write_text("mine\n")
    before = target.stat()
    script = (
        "echo changed > app.py; mkdir -p pkg/sub; echo x > pkg/sub/new.py; "
        f"ln -s {target} link; cp /bin/true suid; chmod 4755 suid; echo done"
    )
    assert "done" in run(sandbox(place), place, script)
    for path in (worktree, worktree / "app.py", worktree / "pkg" / "sub" / "new.py"):
        assert path.stat().st_uid == os.geteuid(), path
        assert path.stat().st_gid == os.getegid(), path
    if ROOT:  # lent and given back; a user's own set-user-id file gives only what it has
        assert not (worktree / "suid").stat().st_mode & stat.S_ISUID
    after = target.stat()
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)


@needs_root
def test_a_writable_path_is_lent_and_given_back_with_its_owners(place: Path) -> None:
    cache = place / "cache"
    cache.mkdir()
    (cache / "old").write_text("old\n")
    os.chown(cache / "old", 1234, 1234)
    said = run(sandbox(place, writable=[str(cache)]), place, f"echo new > {cache}/new; echo ok")
    assert "ok" in said and (cache / "new").read_text() == "new\n"
    assert (cache / "old").stat().st_uid == 1234
    assert (cache / "new").stat().st_uid == os.geteuid()


@needs_root
def test_without_setpriv_the_sandbox_says_it_runs_as_root(
    place: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("bwrap", "prlimit"):
        found = shutil.which(name)
        assert found is not None
        (tools / name).symlink_to(found)
    monkeypatch.setenv("PATH", str(tools))
    sb = sandbox(place)
    assert sb.identity.as_root and "setpriv" in sb.identity.note
    probe(sb)  # it works, as root; the night records that it did


NOBODY_RUN = """
import sys, tempfile
from pathlib import Path
from overnight.process import run_command
from overnight.sandbox import SandboxSpec, build_sandbox, probe
root = Path(tempfile.mkdtemp(prefix="overnight-nobody-"))
(root / "wt").mkdir()
sb = build_sandbox(SandboxSpec(), sealed=[root / "sealed"], home=root)
probe(sb)
out = run_command(["/bin/sh", "-c", "id -u; touch made; cat /etc/shadow"], cwd=root / "wt",
                  timeout_s=60, confine=sb)
print("IDENTITY", sb.identity.uid, sb.identity.as_root)
print(out.output)
print("OWNER", (root / "wt" / "made").stat().st_uid)
"""


@needs_root
def test_the_sandbox_works_for_a_harness_that_is_not_root() -> None:
    """The same sandbox started by an unprivileged user (nobody, through setpriv): an
    unprivileged user namespace, its own uid, nothing to lend."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed: cannot become an unprivileged user")
    argv = [
        setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--",
        sys.executable, "-c", NOBODY_RUN,
    ]  # fmt: skip
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(PROJECT / "src"), "HOME": "/tmp"}
    check = subprocess.run(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--",
         sys.executable, "-c", "import overnight"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if check.returncode != 0:
        pytest.skip(f"nobody cannot run this Python or read the project: {check.stderr[-300:]}")
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    if "unprivileged user namespaces" in done.stderr:
        pytest.skip("unprivileged user namespaces are not allowed here for nobody")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "IDENTITY 65534 False" in done.stdout
    assert "OWNER 65534" in done.stdout
    assert "root:" not in done.stdout and "No such file" in done.stdout

"""``[sandbox] mode`` through the CLI: the probe that refuses a night before anything is
written, what each mode confines, and an unsandboxed night said as much."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.kills import overnight
from tests.helpers.nights import cli_env, command_task, make_repo, spec_data, write_spec
from tests.helpers.sandbox import require_bwrap

BROKEN_BWRAP = "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"


def broken_path(tmp_path: Path) -> str:
    fake = tmp_path / "fakebin"
    fake.mkdir(exist_ok=True)
    (fake / "bwrap").write_text(BROKEN_BWRAP)
    (fake / "bwrap").chmod(0o755)
    return f"{fake}{os.pathsep}{os.environ['PATH']}"


def night(tmp_path: Path, **sections: Any) -> Path:
    repo = make_repo(tmp_path / "repo")
    tasks = [command_task("c1", "echo one > one.txt", "test -f one.txt")]
    data = spec_data(repo, predicate="test -f one.txt", tasks=tasks, model=False, **sections)
    return write_spec(tmp_path / "night.toml", data)


def cli(
    tmp_path: Path, *args: str | Path, path: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = cli_env()
    env["OVERNIGHT_HOME"] = str(tmp_path / "home")
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        overnight(*args), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )


def result(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "result.json").read_text())
    return data


def test_a_sandbox_that_does_not_work_refuses_the_night_before_anything_is_written(
    tmp_path: Path,
) -> None:
    spec = night(tmp_path, sandbox={"mode": "on"})
    done = cli(tmp_path, "run", spec, "--run-dir", tmp_path / "run", path=broken_path(tmp_path))
    assert done.returncode == 64, done.stderr
    assert "setting up uid map: Permission denied" in done.stderr  # bubblewrap's own words
    assert "sandbox" in done.stderr and 'mode = "off"' in done.stderr  # the field and the fix
    assert not (tmp_path / "run").exists()
    assert (
        "overnight/"
        not in subprocess.run(
            ["git", "-C", str(tmp_path / "repo"), "branch", "--list"],
            capture_output=True,
            text=True,
        ).stdout
    )


def test_a_night_that_cannot_need_the_sandbox_runs_without_it_in_auto(tmp_path: Path) -> None:
    # Only the user's own commands, in a worktree no agent touches: run as written.
    spec = night(tmp_path)
    done = cli(
        tmp_path, "run", spec, "--run-dir", tmp_path / "run", "--quiet", path=broken_path(tmp_path)
    )
    assert done.returncode == 0, done.stderr
    sb = result(tmp_path / "run")["sandbox"]
    assert sb["mode"] == "auto" and sb["sandboxed_commands"] == 0
    assert sb["unsandboxed_commands"] >= 3  # the predicate, the task, its verify


def test_mode_off_is_allowed_recorded_and_shown_first_in_the_report(tmp_path: Path) -> None:
    spec = night(tmp_path, sandbox={"mode": "off"})
    run_dir = tmp_path / "run"
    done = cli(tmp_path, "run", spec, "--run-dir", run_dir, "--quiet", path=broken_path(tmp_path))
    assert done.returncode == 0, done.stderr
    sb = result(run_dir)["sandbox"]
    assert sb == {
        "mode": "off",
        "network": False,
        "sandboxed_commands": 0,
        "unsandboxed_commands": sb["unsandboxed_commands"],
        "uid": None,  # no sandbox was built
        "ran_as_root": False,
        "root_reason": "",
        "process_limit": "",  # nothing bound: no sandbox
    }
    md = cli(tmp_path, "report", run_dir)
    assert md.returncode == 0, md.stderr
    first_lines = md.stdout.splitlines()[:4]
    assert any("Unsandboxed night" in line for line in first_lines), first_lines
    html = cli(tmp_path, "report", run_dir, "--html")
    assert html.returncode == 0, html.stderr
    body = (run_dir / "report.html").read_text().split("<body>", 1)[1]
    assert body.index("Unsandboxed night") < body.index("stop reason")


def test_a_sandboxed_night_has_no_banner(tmp_path: Path) -> None:
    require_bwrap()
    spec = night(tmp_path, sandbox={"mode": "on"})
    run_dir = tmp_path / "run"
    done = cli(tmp_path, "run", spec, "--run-dir", run_dir, "--quiet")
    assert done.returncode == 0, done.stderr
    sb = result(run_dir)["sandbox"]
    assert sb["mode"] == "on" and sb["unsandboxed_commands"] == 0
    # the task's command and its verify; the goal's verdict on the landed tree is the
    # verify's run of the same command, not a third command
    assert sb["sandboxed_commands"] >= 2
    # a root harness's sandbox drops to an unprivileged uid; any other runs as its user
    assert sb["ran_as_root"] is False and sb["uid"] not in (None, 0)
    assert os.geteuid() == 0 or sb["uid"] == os.geteuid()
    md = cli(tmp_path, "report", run_dir)
    assert "Unsandboxed" not in md.stdout
    assert 'Sandbox: mode "on", without network' in md.stdout
    assert f"Sandboxed commands ran as uid {sb['uid']}, not root." in md.stdout


@pytest.mark.parametrize(("mode", "reads"), [("on", False), ("auto", True)])
def test_mode_on_confines_the_users_own_commands(tmp_path: Path, mode: str, reads: bool) -> None:
    # A file beside the run, in the machine's /tmp: a user's command task in "auto" (no
    # agent in this night) reads it; in "on" it runs sandboxed with a private /tmp.
    require_bwrap()
    repo = make_repo(tmp_path / "repo")
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read\n")
    tasks = [command_task("c1", f"cat {secret} > seen.txt 2>&1; true", "test -f seen.txt")]
    data = spec_data(
        repo, predicate="test -f seen.txt", tasks=tasks, model=False, sandbox={"mode": mode}
    )
    spec = write_spec(tmp_path / "night.toml", data)
    run_dir = tmp_path / "run"
    done = cli(tmp_path, "run", spec, "--run-dir", run_dir, "--quiet")
    r = result(run_dir)
    assert [v["id"] for v in r["verified"]] == ["c1"], done.stderr
    seen = subprocess.run(
        ["git", "-C", str(repo), "show", f"{r['branch']['name']}:seen.txt"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert ("do not read" in seen) is reads


@pytest.mark.parametrize("field", ["writable", "readable"])
def test_a_sandbox_path_that_would_expose_the_run_is_refused(tmp_path: Path, field: str) -> None:
    spec = night(tmp_path, sandbox={"mode": "auto", field: [str(tmp_path)]})
    done = cli(tmp_path, "run", spec, "--run-dir", tmp_path / "run")
    assert done.returncode == 64
    assert f"sandbox.{field}" in done.stderr or "sandbox" in done.stderr
    assert not (tmp_path / "run").exists()
